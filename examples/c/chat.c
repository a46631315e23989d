/* A terminal chat over gemlet's C API: one user turn per line of stdin, the answer streamed to stdout.
 *   chat MODEL.gguf [TEMPERATURE]     (TEMPERATURE 0, the default: greedy, the same answer each run) */
#define _POSIX_C_SOURCE 200809L /* getline: a turn may be longer than any fixed buffer */
#include <gemlet/gemlet.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Called for each piece of the answer; flushing shows it as it comes, not once the turn ends. */
static bool Print(gemlet_chunk_kind kind, const char* text, size_t len, void* user_data) {
  (void)user_data;
  FILE* out = kind == GEMLET_CHUNK_TEXT ? stdout : stderr; /* a Gemma 4 thought is not the answer */
  fwrite(text, 1, len, out);
  fflush(out);
  return true;
}

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    fprintf(stderr, "usage: %s MODEL.gguf [TEMPERATURE]\n", argv[0]);
    return 2;
  }
  gemlet_generate_options generate = gemlet_generate_options_default();
  generate.temperature = 0;
  if (argc == 3) {
    char* end = NULL;
    generate.temperature = strtof(argv[2], &end);
    if (end == argv[2] || *end != '\0' || generate.temperature < 0) {
      fprintf(stderr, "chat: bad temperature '%s'\n", argv[2]);
      return 2;
    }
  }
  gemlet_engine* engine = NULL;
  gemlet_conversation* conversation = NULL;
  if (gemlet_engine_load(argv[1], NULL, &engine) != GEMLET_OK ||
      gemlet_conversation_create(engine, NULL, &conversation) != GEMLET_OK) {
    fprintf(stderr, "chat: %s\n", gemlet_last_error());
    gemlet_engine_free(engine);
    return 1;
  }
  int status = 0;
  char* line = NULL;
  size_t capacity = 0;
  ssize_t len;
  while ((len = getline(&line, &capacity, stdin)) != -1) {
    if (len > 0 && line[len - 1] == '\n') line[len - 1] = '\0';
    if (line[0] == '\0') continue;
    if (gemlet_conversation_send(conversation, line, &generate, Print, NULL, NULL) != GEMLET_OK) {
      fprintf(stderr, "\nchat: %s\n", gemlet_last_error());
      status = 1;
      break;
    }
    printf("\n");
    fflush(stdout);
  }
  free(line);
  gemlet_conversation_free(conversation);
  gemlet_engine_free(engine);
  return status;
}
