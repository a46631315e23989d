// A QEMU TCG plugin that counts the guest instructions a program executes, for instruction counts
// per token on aarch64 (bench/arm64/insns_per_token.sh). Build with the host compiler:
//   gcc -shared -fPIC -O2 -o insn_count.so bench/arm64/insn_count.c
//   qemu-aarch64 -plugin ./insn_count.so,out=FILE ./program ...
// The total goes to FILE (or stderr) at exit. Each translated block adds its instruction count to
// a counter inline (no callback per block); a block left early by an exception still counts
// whole, which user-mode code does not do in its hot loops. With symbols=FILE2, the count is also
// split by the function (of the main executable: QEMU reads its symbols) each block starts in,
// written to FILE2 as "count name" lines, largest first: where a kernel's instructions go.
//
// Debian 12 ships QEMU 7.2 without its qemu-plugin.h, so the few declarations used are written out
// here from the plugin API (version 1, docs/devel/tcg-plugins.rst); they must match its ABI.
#include <inttypes.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef uint64_t qemu_plugin_id_t;
struct qemu_plugin_tb;
typedef struct {
  const char* target_name;
  struct {
    int min;
    int cur;
  } version;
  bool system_emulation;
  union {
    struct {
      int smp_vcpus;
      int max_vcpus;
    } system;
  };
} qemu_info_t;
enum qemu_plugin_op { QEMU_PLUGIN_INLINE_ADD_U64 };
typedef void (*qemu_plugin_vcpu_tb_trans_cb_t)(qemu_plugin_id_t id, struct qemu_plugin_tb* tb);
typedef void (*qemu_plugin_udata_cb_t)(qemu_plugin_id_t id, void* userdata);
void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id, qemu_plugin_vcpu_tb_trans_cb_t cb);
void qemu_plugin_register_vcpu_tb_exec_inline(struct qemu_plugin_tb* tb, enum qemu_plugin_op op, void* ptr,
                                              uint64_t imm);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb* tb);
struct qemu_plugin_insn;
struct qemu_plugin_insn* qemu_plugin_tb_get_insn(const struct qemu_plugin_tb* tb, size_t idx);
const char* qemu_plugin_insn_symbol(const struct qemu_plugin_insn* insn);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id, qemu_plugin_udata_cb_t cb, void* userdata);

__attribute__((visibility("default"))) int qemu_plugin_version = 1;

// One counter for all threads: an inline add is a plain (non-atomic) add in the generated code, so
// threads running at once may lose a few increments. Count single-threaded runs for exact figures.
static uint64_t insns;
static const char* out_path;
static const char* symbols_path;

// Per-function counters: an open-addressing table keyed by the symbol's name pointer (QEMU hands
// out the same pointer for every block of one function). Blocks are translated by one thread at a
// time in a single-threaded guest, which is what this mode is for.
enum { kSlots = 1 << 16 };
static struct {
  const char* name;
  uint64_t count;
} functions[kSlots];
static uint64_t unnamed;

static uint64_t* CounterOf(const char* name) {
  if (name == NULL) return &unnamed;
  size_t h = ((uintptr_t)name >> 3) & (kSlots - 1);
  for (size_t probe = 0; probe < kSlots; ++probe, h = (h + 1) & (kSlots - 1)) {
    if (functions[h].name == name) return &functions[h].count;
    if (functions[h].name == NULL) {
      functions[h].name = name;
      return &functions[h].count;
    }
  }
  return &unnamed;
}

static void OnTranslate(qemu_plugin_id_t id, struct qemu_plugin_tb* tb) {
  (void)id;
  const size_t n = qemu_plugin_tb_n_insns(tb);
  qemu_plugin_register_vcpu_tb_exec_inline(tb, QEMU_PLUGIN_INLINE_ADD_U64, &insns, n);
  if (symbols_path != NULL && n > 0) {
    const char* name = qemu_plugin_insn_symbol(qemu_plugin_tb_get_insn(tb, 0));
    qemu_plugin_register_vcpu_tb_exec_inline(tb, QEMU_PLUGIN_INLINE_ADD_U64, CounterOf(name), n);
  }
}

static int ByCountDescending(const void* a, const void* b) {
  const uint64_t x = ((const uint64_t*)a)[1], y = ((const uint64_t*)b)[1];
  return x < y ? 1 : x > y ? -1 : 0;
}

static void WriteSymbols(void) {
  FILE* f = fopen(symbols_path, "w");
  if (f == NULL) return;
  size_t n = 0;
  for (size_t i = 0; i < kSlots; ++i) n += functions[i].name != NULL;
  uint64_t(*rows)[2] = calloc(n + 1, sizeof *rows);
  size_t k = 0;
  for (size_t i = 0; i < kSlots; ++i) {
    if (functions[i].name != NULL) {
      rows[k][0] = i;
      rows[k][1] = functions[i].count;
      ++k;
    }
  }
  qsort(rows, k, sizeof *rows, ByCountDescending);
  fprintf(f, "%" PRIu64 " (no symbol: shared libraries)\n", unnamed);
  for (size_t i = 0; i < k; ++i) fprintf(f, "%" PRIu64 " %s\n", rows[i][1], functions[rows[i][0]].name);
  free(rows);
  fclose(f);
}

static void OnExit(qemu_plugin_id_t id, void* userdata) {
  (void)id;
  (void)userdata;
  FILE* f = out_path != NULL ? fopen(out_path, "w") : NULL;
  fprintf(f != NULL ? f : stderr, "insns %" PRIu64 "\n", insns);
  if (f != NULL) fclose(f);
  if (symbols_path != NULL) WriteSymbols();
}

__attribute__((visibility("default"))) int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t* info,
                                                                int argc, char** argv) {
  (void)info;
  for (int i = 0; i < argc; ++i) {
    if (strncmp(argv[i], "out=", 4) == 0) out_path = strdup(argv[i] + 4);
    if (strncmp(argv[i], "symbols=", 8) == 0) symbols_path = strdup(argv[i] + 8);
  }
  qemu_plugin_register_vcpu_tb_trans_cb(id, OnTranslate);
  qemu_plugin_register_atexit_cb(id, OnExit, NULL);
  return 0;
}
