# gemlet: the two entry points of the README. `make run` builds and runs the demo; `make test` builds
# and runs every test, then again under AddressSanitizer + UndefinedBehaviorSanitizer, the threaded
# public-API tests under ThreadSanitizer, then the NEON
# kernels, attention and one golden model test cross-compiled for arm64 and run under qemu-aarch64.
JOBS ?= $(shell nproc)
BUILD ?= build
ASAN_BUILD ?= build-asan
ARM64_BUILD ?= build-arm64
TSAN_BUILD ?= build-tsan
# ccache (when installed) keys objects by paths relative to this tree: another clone hits them.
export CCACHE_BASEDIR := $(CURDIR)

.PHONY: all deps deps-test build run test test-release test-asan test-tsan test-arm64 clean

all: build

deps:
	./scripts/install-deps.sh

# What the tests need beyond the build (Chromium for the chat page's browser test).
deps-test:
	./scripts/install-deps.sh --test

# The main job needs only the repository: the CLI, not the tests (they read ../shared/testdata).
run: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release
	cmake --build $(BUILD) -j $(JOBS) --target gemlet
	./scripts/run-demo.sh $(BUILD)/apps/gemlet/gemlet

build: deps-test
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DGEMLET_BUILD_TESTS=ON
	cmake --build $(BUILD) -j $(JOBS)

test: test-release test-asan test-tsan test-arm64

test-release: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

test-asan: deps-test
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGEMLET_SANITIZE=ON -DGEMLET_BUILD_TESTS=ON
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 ctest --output-on-failure -j $(JOBS)

# ThreadSanitizer over the public API's threaded tests: one engine driven by four threads with four
# sessions, cancels from another thread (of a session, a conversation, a BatchDecoder's requests).
# The vector kernels' files are built uninstrumented there (src/kernels/CMakeLists.txt says why).
test-tsan: deps
	cmake -S . -B $(TSAN_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGEMLET_TSAN=ON -DGEMLET_BUILD_TESTS=ON
	cmake --build $(TSAN_BUILD) -j $(JOBS) --target api_test conversation_test c_api_test batch_decoder_test http_front_test
	TSAN_OPTIONS=halt_on_error=1 $(TSAN_BUILD)/tests/api/api_test --gtest_filter='ApiThreads.*:ApiCancel.*:ApiConversation.*' --gtest_brief=1
	TSAN_OPTIONS=halt_on_error=1 $(TSAN_BUILD)/tests/api/conversation_test --gtest_filter='ConversationBackground.*' --gtest_brief=1
	TSAN_OPTIONS=halt_on_error=1 $(TSAN_BUILD)/tests/api/batch_decoder_test --gtest_filter='BatchDecoder.Cancel*' --gtest_brief=1
	TSAN_OPTIONS=halt_on_error=1 $(TSAN_BUILD)/tests/api/c_api_test --gtest_filter='CApi.*Cancel*:CApi.*PerThread*' --gtest_brief=1
	TSAN_OPTIONS=halt_on_error=1 $(TSAN_BUILD)/tests/server/http_front_test --gtest_brief=1

test-arm64:
	./scripts/install-deps.sh --arm64
	JOBS=$(JOBS) ./scripts/test-arm64.sh $(ARM64_BUILD)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(TSAN_BUILD) $(ARM64_BUILD)
