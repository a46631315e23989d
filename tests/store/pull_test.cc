// `gemlet pull/update/rollback/list/show/verify/rm` end to end against http_server.py on loopback:
// resumes after drops and restarts, servers that ignore Range or lie about Content-Length, error
// statuses, corrupted bytes, a full disk, Hugging Face's layout through HF_ENDPOINT with HF_TOKEN, a
// proxy from the environment, manifests, `run -m NAME`, and one clear line for bad input.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "store/store_test_util.h"

namespace gemlet {
namespace {

namespace fs = std::filesystem;
using test::Gemlet;
using test::LocalServer;

constexpr size_t kSize = 2 << 20;

class Pull : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tmp_ = new test::TempDir();
    root_ = tmp_->File("www");
    test::WriteFile(root_ + "/a.gguf", test::RandomBytes(kSize, 11));
    test::WriteFile(root_ + "/b.gguf", test::RandomBytes(kSize, 12));
    fs::copy_file(GEMLET_DEMO_MODEL, root_ + "/demo.gguf");
    sha_a_ = test::FileSha(root_ + "/a.gguf");
    sha_b_ = test::FileSha(root_ + "/b.gguf");
    server_ = new LocalServer(root_);
    ASSERT_GT(server_->port(), 0) << "http_server.py did not start";
  }
  static void TearDownTestSuite() {
    delete server_;
    delete tmp_;
  }
  void SetUp() override {
    store_ = std::make_unique<test::TempDir>();
    server_->ClearLog();
  }
  // --store S and short pauses between attempts; the environment without proxies or tokens.
  std::string Store() const { return " --store " + store_->path(); }
  std::string Fast() const { return Store() + " --retry-delay-ms 20"; }
  static std::string Env() {
    return "env -u http_proxy -u https_proxy -u HTTP_PROXY -u HF_TOKEN -u GEMLET_MANIFEST -u GEMLET_CATALOG";
  }
  test::CommandResult PullUrl(const std::string& path, const std::string& sha, const std::string& flags = "") const {
    return Gemlet("pull " + server_->Url(path) + (sha.empty() ? "" : " --sha256 " + sha) + Fast() + " " + flags, Env());
  }
  std::string Active(const std::string& name) const {
    const nlohmann::json j = test::ReadJson(store_->path() + "/" + name + "/model.json");
    for (const auto& v : j["versions"]) {
      if (v["version"] == j["active"]) return store_->path() + "/" + name + "/" + v["file"].get<std::string>();
    }
    return "";
  }
  std::vector<std::string> Partials() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(store_->path() + "/.partial")) {
      if (e.path().extension() == ".part") out.push_back(e.path().string());
    }
    return out;
  }
  // The Range headers the server saw, in order ("" for none).
  static std::vector<std::string> Ranges(const std::string& path_part) {
    std::vector<std::string> out;
    for (const auto& r : server_->Requests()) {
      if (r["path"].get<std::string>().find(path_part) == std::string::npos) continue;
      out.push_back(r["range"].is_null() ? "" : r["range"].get<std::string>());
    }
    return out;
  }

  static test::TempDir* tmp_;
  static std::string root_, sha_a_, sha_b_;
  static LocalServer* server_;
  std::unique_ptr<test::TempDir> store_;
};
test::TempDir* Pull::tmp_ = nullptr;
std::string Pull::root_, Pull::sha_a_, Pull::sha_b_;
LocalServer* Pull::server_ = nullptr;

TEST_F(Pull, InstallsByUrlAndRunsByName) {
  auto r = PullUrl("/demo.gguf", test::FileSha(GEMLET_DEMO_MODEL));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("installed demo"), std::string::npos) << r.out;
  auto list = Gemlet("list" + Store());
  EXPECT_NE(list.out.find("demo"), std::string::npos) << list.out;
  auto show = Gemlet("show demo" + Store());
  EXPECT_NE(show.out.find(test::FileSha(GEMLET_DEMO_MODEL)), std::string::npos) << show.out;
  auto run = Gemlet("run -m demo --store " + store_->path() + " -p Hello -n 3 --temp 0 -t 2 --no-cache");
  EXPECT_EQ(run.exit_code, 0) << run.out;
  EXPECT_EQ(Gemlet("verify" + Store()).exit_code, 0);
  // Pulling it again downloads nothing.
  server_->ClearLog();
  auto again = PullUrl("/demo.gguf", test::FileSha(GEMLET_DEMO_MODEL), "--version " + test::FileSha(GEMLET_DEMO_MODEL).substr(0, 12));
  EXPECT_EQ(again.exit_code, 0) << again.out;
  EXPECT_NE(again.out.find("installed already"), std::string::npos) << again.out;
  EXPECT_TRUE(server_->Requests().empty());
  auto rm = Gemlet("rm demo" + Store());
  EXPECT_EQ(rm.exit_code, 0) << rm.out;
  // "demo" names the bundled model again once the store has none of that name; the store has none.
  auto gone = Gemlet("show demo" + Store());
  EXPECT_EQ(gone.exit_code, 1);
  EXPECT_EQ(test::Lines(gone.out), 1) << gone.out;
  EXPECT_NE(gone.out.find("no model 'demo' in the store"), std::string::npos) << gone.out;
}

TEST_F(Pull, ResumesAfterEveryDroppedConnection) {
  auto r = PullUrl("/f/drop=600000/a.gguf", sha_a_);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(test::FileSha(Active("a")), sha_a_);
  const std::vector<std::string> ranges = Ranges("/a.gguf");
  ASSERT_EQ(ranges.size(), 4u) << "2 MiB in pieces of 600 kB";
  EXPECT_EQ(ranges[0], "");
  EXPECT_EQ(ranges[1], "bytes=600000-");
  EXPECT_EQ(ranges[3], "bytes=1800000-");
  EXPECT_TRUE(Partials().empty());
}

// A killed pull leaves its partial file; the next process resumes it, with If-Range.
TEST_F(Pull, ResumesAcrossAProcessRestart) {
  const std::string url = server_->Url("/f/slow=2000000/a.gguf");
  const std::string cmd = Env() + " " + test::GemletBinary() + " pull " + url + " --sha256 " + sha_a_ + Fast();
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::execl("/bin/sh", "sh", "-c", ("exec " + cmd + " >/dev/null 2>&1").c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  const std::vector<std::string> parts = Partials();
  ASSERT_EQ(parts.size(), 1u);
  const uint64_t had = fs::file_size(parts[0]);
  EXPECT_GT(had, 100000u);
  EXPECT_LT(had, kSize);
  server_->ClearLog();
  auto r = test::RunCommand(cmd + " 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto requests = server_->Requests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(requests[0]["range"], "bytes=" + std::to_string(had) + "-");
  EXPECT_FALSE(requests[0]["if_range"].is_null()) << "the server's validator goes back with the range";
  EXPECT_EQ(test::FileSha(Active("a")), sha_a_);
}

TEST_F(Pull, AServerThatIgnoresRangeStartsTheFileAgain) {
  auto r = PullUrl("/f/norange,dropfirst=700000/a.gguf", sha_a_, "-v");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(Ranges("/a.gguf"), (std::vector<std::string>{"", "bytes=700000-"}));
  EXPECT_EQ(test::FileSha(Active("a")), sha_a_) << "the 200 replaced the prefix instead of being appended";
}

TEST_F(Pull, AContentLengthTooLargeEndsInAResume) {
  auto r = PullUrl("/f/len=+5000/a.gguf", sha_a_);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(test::FileSha(Active("a")), sha_a_);
}

TEST_F(Pull, AContentLengthTooSmallIsRefused) {
  auto r = PullUrl("/f/len=-5000/a.gguf", sha_a_);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(test::Lines(r.out), 1) << r.out;
  EXPECT_NE(r.out.find("SHA-256"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("discarded"), std::string::npos) << r.out;
  EXPECT_TRUE(Partials().empty()) << "a download that failed its digest is never resumed from";
  EXPECT_FALSE(fs::exists(store_->path() + "/a"));
}

TEST_F(Pull, ErrorStatusesFailOrAreRetried) {
  auto missing = PullUrl("/nothing.gguf", "", "--trust-unverified");
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_EQ(test::Lines(missing.out), 1) << missing.out;
  EXPECT_NE(missing.out.find("HTTP 404"), std::string::npos) << missing.out;
  EXPECT_EQ(server_->Requests().size(), 1u) << "a 404 is not retried";
  server_->ClearLog();
  auto broken = PullUrl("/f/status=500/a.gguf", sha_a_, "--retries 2");
  EXPECT_EQ(broken.exit_code, 1);
  EXPECT_EQ(test::Lines(broken.out), 1) << broken.out;
  EXPECT_NE(broken.out.find("HTTP 500"), std::string::npos) << broken.out;
  EXPECT_NE(broken.out.find("gave up after 3 attempts"), std::string::npos) << broken.out;
  EXPECT_EQ(server_->Requests().size(), 3u);
  auto flaky = PullUrl("/f/fail=2/a.gguf", sha_a_, "--retries 3");
  EXPECT_EQ(flaky.exit_code, 0) << flaky.out;
  EXPECT_EQ(test::FileSha(Active("a")), sha_a_);
}

TEST_F(Pull, CorruptedBytesAreRefusedAndNotKept) {
  auto r = PullUrl("/f/corrupt=123456/a.gguf", sha_a_);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(test::Lines(r.out), 1) << r.out;
  EXPECT_NE(r.out.find("expected " + sha_a_), std::string::npos) << r.out;
  EXPECT_TRUE(Partials().empty());
  EXPECT_TRUE(fs::is_empty(store_->path() + "/.partial") || Partials().empty());
  EXPECT_EQ(Gemlet("list" + Store()).out.find("a "), std::string::npos);
  EXPECT_TRUE(test::UnnamedFiles(store_->path()).empty());
}

// A resumed download that fails its digest may owe it to the old prefix: it is fetched once more
// from the start (here the first response was corrupt, the later ones are right).
TEST_F(Pull, ABadPrefixIsDownloadedAgainFromTheStart) {
  auto r = PullUrl("/f/corruptonce=1000,dropfirst=900000/a.gguf", sha_a_, "-v");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("downloading it again from the start"), std::string::npos) << r.out;
  EXPECT_EQ(Ranges("/a.gguf"), (std::vector<std::string>{"", "bytes=900000-", ""}));
  EXPECT_EQ(test::FileSha(Active("a")), sha_a_);
}

// A full disk: a file size limit makes the write fail (EFBIG); the prefix stays and resumes later.
TEST_F(Pull, AFailedWriteStopsThePullAndTheNextOneResumes) {
  const std::string cmd = "trap '' XFSZ; ulimit -f 1024; exec " + Env() + " " + test::GemletBinary() + " pull " +
                          server_->Url("/a.gguf") + " --sha256 " + sha_a_ + Fast() + " 2>&1";
  auto full = test::RunCommand(cmd);
  EXPECT_EQ(full.exit_code, 1);
  EXPECT_EQ(test::Lines(full.out), 1) << full.out;
  EXPECT_NE(full.out.find("cannot write"), std::string::npos) << full.out;
  EXPECT_NE(full.out.find("File too large"), std::string::npos) << full.out;
  ASSERT_EQ(Partials().size(), 1u);
  const uint64_t kept = fs::file_size(Partials()[0]);  // the limit: 512 KiB (dash's blocks) or 1 MiB
  EXPECT_TRUE(kept == 512u << 10 || kept == 1u << 20) << kept;
  server_->ClearLog();
  auto r = PullUrl("/a.gguf", sha_a_);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(Ranges("/a.gguf"), (std::vector<std::string>{"bytes=" + std::to_string(kept) + "-"}));
  EXPECT_EQ(test::FileSha(Active("a")), sha_a_);
}

TEST_F(Pull, TooLittleFreeSpaceIsRefusedBeforeWriting) {
  auto r = PullUrl("/a.gguf", sha_a_, "--assume-free 100000");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(test::Lines(r.out), 1) << r.out;
  EXPECT_NE(r.out.find("not enough disk space"), std::string::npos) << r.out;
  for (const std::string& p : Partials()) EXPECT_EQ(fs::file_size(p), 0u);
}

TEST_F(Pull, HuggingFaceThroughAMirrorWithAToken) {
  LocalServer hf(root_, "--hf-token secret");
  const std::string env = Env() + " HF_ENDPOINT=http://127.0.0.1:" + std::to_string(hf.port());
  auto denied = Gemlet("pull hf://org/repo/a.gguf --sha256 " + sha_a_ + Fast(), env);
  EXPECT_EQ(denied.exit_code, 1);
  EXPECT_EQ(test::Lines(denied.out), 1) << denied.out;
  EXPECT_NE(denied.out.find("HTTP 401"), std::string::npos) << denied.out;
  EXPECT_NE(denied.out.find("HF_TOKEN"), std::string::npos) << denied.out;
  auto r = Gemlet("pull hf://org/repo/a.gguf@v2 --sha256 " + sha_a_ + Fast(), env + " HF_TOKEN=secret");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto requests = hf.Requests();
  ASSERT_GE(requests.size(), 3u);
  EXPECT_EQ(requests[1]["path"], "/org/repo/resolve/v2/a.gguf");
  EXPECT_EQ(requests[1]["auth"], "Bearer secret");
  EXPECT_EQ(requests[2]["path"], "/blobs/v2/a.gguf") << "the redirect was followed";
  auto show = Gemlet("show a" + Store());
  EXPECT_NE(show.out.find("version v2"), std::string::npos) << show.out;
}

// Every download is checked against a digest that did not come with the bytes: for hf:// the hub's
// LFS record, asked before the download; else --sha256, a manifest or the catalog, or the user's
// explicit --trust-unverified.
TEST_F(Pull, HubDigestsAreCheckedAndUnverifiedFilesNeedConsent) {
  const std::string env = Env() + " HF_ENDPOINT=http://127.0.0.1:" + std::to_string(server_->port());
  auto r = Gemlet("pull hf://org/repo/a.gguf" + Fast() + " -v", env);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("the hub gives SHA-256 " + sha_a_), std::string::npos) << r.out;
  EXPECT_EQ(test::FileSha(Active("a")), sha_a_);

  server_->ClearLog();
  auto wrong = Gemlet("pull hf://org/wrongsha/b.gguf" + Fast(), env);
  EXPECT_EQ(wrong.exit_code, 1);
  EXPECT_EQ(test::Lines(wrong.out), 1) << wrong.out;
  EXPECT_NE(wrong.out.find("expected " + std::string(64, '0')), std::string::npos) << wrong.out;
  EXPECT_FALSE(fs::exists(store_->path() + "/b"));

  // No digest anywhere: refused before a byte is fetched, then installed when the user says so.
  server_->ClearLog();
  auto unverified = Gemlet("pull hf://org/nosha/b.gguf" + Fast(), env);
  EXPECT_EQ(unverified.exit_code, 1);
  EXPECT_EQ(test::Lines(unverified.out), 1) << unverified.out;
  EXPECT_NE(unverified.out.find("--trust-unverified"), std::string::npos) << unverified.out;
  for (const auto& req : server_->Requests()) EXPECT_EQ(req["path"].get<std::string>().find("/blobs/"), std::string::npos);
  auto url = PullUrl("/b.gguf", "");
  EXPECT_EQ(url.exit_code, 1);
  EXPECT_NE(url.out.find("no SHA-256 to check"), std::string::npos) << url.out;
  EXPECT_FALSE(fs::exists(store_->path() + "/b"));
  auto trusted = PullUrl("/b.gguf", "", "--trust-unverified -v");
  ASSERT_EQ(trusted.exit_code, 0) << trusted.out;
  EXPECT_NE(trusted.out.find("installing the bytes as they come"), std::string::npos) << trusted.out;
  EXPECT_EQ(test::FileSha(Active("b")), sha_b_);
}

// `gemlet pull NAME` without a manifest: the catalog built in (its hf:// sources through a local
// mirror), or one given by GEMLET_CATALOG; the model then runs by that name.
TEST_F(Pull, NamesComeFromTheCatalog) {
  test::TempDir www;
  fs::copy_file(GEMLET_DEMO_MODEL, www.File("gemma-3-1b-it-Q4_K_M.gguf"));
  fs::copy_file(root_ + "/a.gguf", www.File("a.gguf"));
  LocalServer hub(www.path());
  const std::string env = Env() + " HF_ENDPOINT=http://127.0.0.1:" + std::to_string(hub.port());
  auto r = Gemlet("pull gemma3-1b" + Fast(), env);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("installed gemma3-1b"), std::string::npos) << r.out;
  EXPECT_EQ(hub.Requests()[0]["path"], "/ggml-org/gemma-3-1b-it-GGUF/resolve/main/gemma-3-1b-it-Q4_K_M.gguf");
  auto run = Gemlet("run -m gemma3-1b --store " + store_->path() + " -p 你好 -n 3 --temp 0 -t 2 --no-cache");
  EXPECT_EQ(run.exit_code, 0) << run.out;

  const std::string catalog = www.File("catalog.json");
  test::WriteFile(catalog, R"({"models": [{"name": "tiny", "source": "hf://org/repo/a.gguf"}]})");
  auto own = Gemlet("pull tiny" + Fast(), env + " GEMLET_CATALOG=" + catalog);
  ASSERT_EQ(own.exit_code, 0) << own.out;
  EXPECT_EQ(test::FileSha(Active("tiny")), sha_a_);
  auto unknown = Gemlet("pull gemma9-huge" + Fast(), env + " GEMLET_CATALOG=" + catalog);
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_EQ(test::Lines(unknown.out), 1) << unknown.out;
  EXPECT_NE(unknown.out.find("not in " + catalog + " (tiny)"), std::string::npos) << unknown.out;
  test::WriteFile(catalog, R"({"models": [{"name": "tiny", "source": "file:///etc/passwd"}]})");
  auto bad = Gemlet("pull tiny" + Fast(), env + " GEMLET_CATALOG=" + catalog);
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.out.find("is not an hf:// or http(s):// source"), std::string::npos) << bad.out;
}

// A catalog model with towers: `pull NAME` brings them as NAME-mmproj, `show` names them and what
// they take, and run takes an image with no --mmproj; --no-mmproj leaves them; a catalog whose
// mmproj names no other entry is refused.
TEST_F(Pull, CatalogModelsBringTheirTowers) {
  test::TempDir www;
  const std::string hf_mm = std::string(GEMLET_TESTDATA_DIR) + "/hf-mm/gemma4_e2b_image_audio";
  auto made = Gemlet("convert " + hf_mm + " -o " + www.File("seer.gguf") + " --mmproj-out " + www.File("seer-mm.gguf"));
  ASSERT_EQ(made.exit_code, 0) << made.out;
  LocalServer hub(www.path());
  const std::string catalog = www.File("catalog.json");
  test::WriteFile(catalog, R"({"models": [
    {"name": "seer", "mmproj": "seer-towers", "source": "hf://org/repo/seer.gguf"},
    {"name": "seer-towers", "source": "hf://org/repo/seer-mm.gguf"}]})");
  const std::string env = Env() + " HF_ENDPOINT=http://127.0.0.1:" + std::to_string(hub.port()) + " GEMLET_CATALOG=" + catalog;
  auto r = Gemlet("pull seer" + Fast(), env);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("installed towers seer-mmproj"), std::string::npos) << r.out;
  EXPECT_EQ(test::FileSha(Active("seer-mmproj")), test::FileSha(www.File("seer-mm.gguf")));
  auto shown = Gemlet("show seer" + Store());
  EXPECT_EQ(shown.exit_code, 0) << shown.out;
  EXPECT_NE(shown.out.find("towers:   seer-mmproj"), std::string::npos) << shown.out;
  EXPECT_NE(shown.out.find("takes images and audio"), std::string::npos) << shown.out;
  auto run = Gemlet("run -m seer" + Store() + " --image " + hf_mm + "/image.png -p hi -n 2 --temp 0 -t 1 --no-cache");
  EXPECT_EQ(run.exit_code, 0) << run.out;
  // The towers go with the model only when pulled by its catalog name, and only unless told not to.
  test::TempDir other;
  auto bare = Gemlet("pull seer --no-mmproj --store " + other.path() + " --retry-delay-ms 20", env);
  ASSERT_EQ(bare.exit_code, 0) << bare.out;
  EXPECT_FALSE(fs::exists(other.path() + "/seer-mmproj"));
  auto blind = Gemlet("run -m seer --store " + other.path() + " --image " + hf_mm + "/image.png -p hi -n 2 --no-cache");
  EXPECT_EQ(blind.exit_code, 2) << blind.out;
  EXPECT_NE(blind.out.find("--mmproj"), std::string::npos) << blind.out;

  test::WriteFile(catalog, R"({"models": [{"name": "seer", "mmproj": "nothing", "source": "hf://org/repo/seer.gguf"}]})");
  auto bad = Gemlet("pull seer" + Fast(), env);
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.out.find("mmproj: 'nothing' is not another entry"), std::string::npos) << bad.out;
}

// An https download stays https: a redirect to http is refused before a byte comes from it, a
// redirect to another https server is followed, and a certificate no trusted CA signed is refused.
TEST_F(Pull, HttpsIsNotFollowedToHttp) {
  test::TempDir certs;
  const std::string cert = certs.File("cert.pem"), key = certs.File("key.pem");
  const test::CommandResult made = test::RunCommand(
      "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 "
      "-keyout " + key + " -out " + cert + " 2>&1");
  ASSERT_EQ(made.exit_code, 0) << made.out;
  LocalServer to_http(root_, "--tls " + cert + " " + key + " --redirect-to " + server_->Url(""));
  LocalServer to_https(root_, "--tls " + cert + " " + key + " --redirect-to https://127.0.0.1:" + std::to_string(to_http.port()));
  ASSERT_GT(to_http.port(), 0);
  ASSERT_GT(to_https.port(), 0);
  const auto https = [](const LocalServer& s, const std::string& path) {
    return "https://127.0.0.1:" + std::to_string(s.port()) + path;
  };
  auto refused = Gemlet("pull " + https(to_http, "/r/a.gguf") + " --sha256 " + sha_a_ + " --cacert " + cert + Fast(), Env());
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_EQ(test::Lines(refused.out), 1) << refused.out;
  EXPECT_NE(refused.out.find("not https, which is refused"), std::string::npos) << refused.out;
  EXPECT_TRUE(server_->Requests().empty()) << "nothing was fetched over http";
  EXPECT_FALSE(fs::exists(store_->path() + "/a"));

  auto followed = Gemlet("pull " + https(to_https, "/r/a.gguf") + " --sha256 " + sha_a_ + " --cacert " + cert + Fast(), Env());
  ASSERT_EQ(followed.exit_code, 0) << followed.out;
  EXPECT_EQ(test::FileSha(Active("a")), sha_a_);

  auto untrusted = Gemlet("pull " + https(to_http, "/b.gguf") + " --sha256 " + sha_b_ + Fast(), Env());
  EXPECT_EQ(untrusted.exit_code, 1);
  EXPECT_EQ(test::Lines(untrusted.out), 1) << untrusted.out;
  EXPECT_NE(untrusted.out.find("certificate"), std::string::npos) << untrusted.out;
}

// libcurl takes the proxy from the environment: a host that does not resolve is reached through it.
TEST_F(Pull, ProxiesComeFromTheEnvironment) {
  auto r = Gemlet("pull http://gemlet-proxy-test.invalid/a.gguf --sha256 " + sha_a_ + Fast(),
                  Env() + " -u no_proxy -u NO_PROXY http_proxy=http://127.0.0.1:" + std::to_string(server_->port()));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(test::FileSha(Active("a")), sha_a_);
}

class Manifests : public Pull {
 protected:
  void WriteManifest(bool with_v2) {
    nlohmann::json versions = nlohmann::json::array();
    versions.push_back({{"version", "1"}, {"url", server_->Url("/a.gguf")}, {"size", kSize}, {"sha256", sha_a_}});
    if (with_v2) {
      versions.push_back({{"version", "2"}, {"url", "f/-/b.gguf"}, {"size", kSize}, {"sha256", sha_b_}, {"notes", "newer"},
                          {"patches", {{{"from", "1"}, {"url", "p/1-2.gpatch"}, {"size", 10}, {"sha256", sha_a_}}}}});
    }
    const nlohmann::json m = {{"models", {{{"name", "tiny"}, {"versions", versions}}}}};
    test::WriteFile(root_ + "/manifest.json", m.dump(1));
  }
  std::string ManifestUrl() const { return server_->Url("/manifest.json"); }
};

TEST_F(Manifests, PullUpdateKeepOldAndRollback) {
  WriteManifest(false);
  auto r = Gemlet("pull tiny --manifest " + ManifestUrl() + Fast(), Env());
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("installed tiny 1"), std::string::npos) << r.out;
  auto same = Gemlet("update tiny" + Fast(), Env());
  EXPECT_EQ(same.exit_code, 0) << same.out;
  EXPECT_NE(same.out.find("up to date"), std::string::npos) << same.out;
  const std::string v1 = Active("tiny");

  WriteManifest(true);
  auto up = Gemlet("update tiny --keep-old -v" + Fast(), Env());  // the manifest is remembered from pull
  ASSERT_EQ(up.exit_code, 0) << up.out;
  // The manifest's patch is not on the server (404): update says so and takes the whole file.
  EXPECT_NE(up.out.find("the patch from 1 to 2 was not used"), std::string::npos) << up.out;
  EXPECT_NE(up.out.find("updated tiny: 1 -> 2 (full download)"), std::string::npos) << up.out;
  EXPECT_EQ(test::FileSha(Active("tiny")), sha_b_);
  EXPECT_TRUE(fs::exists(v1)) << "--keep-old";
  auto back = Gemlet("rollback tiny" + Store());
  ASSERT_EQ(back.exit_code, 0) << back.out;
  EXPECT_EQ(test::FileSha(Active("tiny")), sha_a_);
  EXPECT_EQ(Gemlet("rollback tiny" + Store()).exit_code, 0);
  EXPECT_EQ(test::FileSha(Active("tiny")), sha_b_);
  EXPECT_EQ(Gemlet("verify" + Store()).exit_code, 0);
  EXPECT_TRUE(test::UnnamedFiles(store_->path()).empty());
}

// A manifest that offers a real patch (`gemlet diff` of two GGUFs: a re-quantized subset of
// tensors): update downloads the patch, not the file, and the new version verifies.
TEST_F(Manifests, UpdateAppliesTheManifestsPatch) {
  const std::string old_file = root_ + "/m1.gguf", new_file = root_ + "/m2.gguf", patch = root_ + "/p/m1-m2.gpatch";
  fs::create_directories(root_ + "/p");
  const std::string base = root_ + "/m0.gguf";
  ASSERT_EQ(Gemlet("synth --preset tiny-gemma3 --seed 3 -o " + base).exit_code, 0);
  ASSERT_EQ(Gemlet("quantize " + base + " " + old_file + " Q8_0").exit_code, 0);
  auto requant = Gemlet("quantize " + base + " " + new_file + " Q8_0 --tensor-type ffn_down=q4_0");
  ASSERT_EQ(requant.exit_code, 0) << requant.out;
  auto diff = Gemlet("diff " + old_file + " " + new_file + " -o " + patch);
  ASSERT_EQ(diff.exit_code, 0) << diff.out;
  const std::string sha_old = test::FileSha(old_file), sha_new = test::FileSha(new_file), sha_patch = test::FileSha(patch);
  const uint64_t new_size = fs::file_size(new_file), patch_size = fs::file_size(patch);
  ASSERT_LT(patch_size, new_size);
  const auto manifest = [&](bool with_v2) {
    nlohmann::json versions = nlohmann::json::array();
    versions.push_back({{"version", "1"}, {"url", server_->Url("/m1.gguf")}, {"size", fs::file_size(old_file)}, {"sha256", sha_old}});
    if (with_v2) {
      versions.push_back({{"version", "2"}, {"url", server_->Url("/m2.gguf")}, {"size", new_size}, {"sha256", sha_new},
                          {"patches", {{{"from", "1"}, {"url", server_->Url("/p/m1-m2.gpatch")}, {"size", patch_size}, {"sha256", sha_patch}}}}});
    }
    test::WriteFile(root_ + "/manifest.json", nlohmann::json({{"models", {{{"name", "m"}, {"versions", versions}}}}}).dump(1));
  };
  manifest(false);
  ASSERT_EQ(Gemlet("pull m --manifest " + ManifestUrl() + Fast(), Env()).exit_code, 0);
  manifest(true);
  auto up = Gemlet("update m" + Fast(), Env());
  ASSERT_EQ(up.exit_code, 0) << up.out;
  EXPECT_NE(up.out.find("updated m: 1 -> 2 (patch)"), std::string::npos) << up.out;
  EXPECT_EQ(test::FileSha(Active("m")), sha_new);
  EXPECT_EQ(Gemlet("verify" + Store()).exit_code, 0);
  EXPECT_TRUE(test::UnnamedFiles(store_->path()).empty());
  // The server saw the patch, never the new file.
  bool patch_fetched = false, file_fetched = false;
  for (const auto& r : server_->Requests()) {
    patch_fetched = patch_fetched || r["path"] == "/p/m1-m2.gpatch";
    file_fetched = file_fetched || r["path"] == "/m2.gguf";
  }
  EXPECT_TRUE(patch_fetched);
  EXPECT_FALSE(file_fetched);
}

TEST_F(Manifests, UpdateWithoutKeepOldRemovesTheOldVersion) {
  WriteManifest(false);
  ASSERT_EQ(Gemlet("pull tiny:1 --manifest " + ManifestUrl() + Fast(), Env()).exit_code, 0);
  const std::string v1 = Active("tiny");
  WriteManifest(true);
  auto up = Gemlet("update tiny" + Fast(), Env());
  ASSERT_EQ(up.exit_code, 0) << up.out;
  EXPECT_FALSE(fs::exists(v1));
  auto back = Gemlet("rollback tiny" + Store());
  EXPECT_EQ(back.exit_code, 1);
  EXPECT_EQ(test::Lines(back.out), 1) << back.out;
  EXPECT_NE(back.out.find("no previous version"), std::string::npos) << back.out;
  // A version the manifest lists that is no longer installed comes back by name.
  ASSERT_EQ(Gemlet("pull tiny:1" + Fast(), Env()).exit_code, 0);
  EXPECT_EQ(test::FileSha(Active("tiny")), sha_a_);
}

TEST_F(Manifests, BadInputGetsOneClearLine) {
  WriteManifest(true);
  const std::vector<test::BadInputCase> cases = {
      {"pull nosuchmodel" + Fast(), "unknown model 'nosuchmodel': not a URL, not in the built-in catalog (gemma3-1b, "},
      {"pull nosuchmodel --manifest " + ManifestUrl() + Fast(), "lists tiny"},
      {"pull tiny:7 --manifest " + ManifestUrl() + Fast(), "no version '7'"},
      {"pull " + server_->Url("/a.gguf") + " --sha256 xyz" + Fast(), "--sha256: 'xyz' is not a SHA-256 digest"},
      {"pull http://127.0.0.1:1/a.gguf --retries 0" + Fast(), "127.0.0.1"},
      {"pull tiny --manifest /nonexistent/manifest.json" + Fast(), "/nonexistent/manifest.json"},
      {"update tiny" + Fast(), "no model 'tiny' in the store"},
      {"rollback tiny" + Store(), "no model 'tiny' in the store"},
      {"show tiny" + Store(), "no model 'tiny' in the store"},
      {"verify tiny" + Store(), "no model 'tiny' in the store"},
      {"rm tiny" + Store(), "no model 'tiny' in the store"},
      {"run -m tiny --store " + store_->path() + " -p x", "'tiny' is neither a file nor a model in the store"},
  };
  for (const auto& c : cases) {
    auto r = Gemlet(c.args, Env());
    EXPECT_NE(r.exit_code, 0) << c.args;
    EXPECT_EQ(test::Lines(r.out), 1) << c.args << "\n" << r.out;
    EXPECT_NE(r.out.find(c.expect), std::string::npos) << c.args << "\n" << r.out;
  }
}

}  // namespace
}  // namespace gemlet
