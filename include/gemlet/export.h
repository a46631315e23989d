/* What libgemlet.so exports: the library is compiled with hidden visibility, so only what these
 * macros mark (the C API's functions, the C++ API's classes and functions) is visible to apps.
 * The same marks are harmless in libgemlet.a. Plain C, because gemlet.h includes it too. */
#ifndef GEMLET_EXPORT_H_
#define GEMLET_EXPORT_H_

/* Windows is not a target yet; the dllexport keeps gemlet.h's former spelling until it is. */
#if defined(_WIN32)
#define GEMLET_EXPORT __declspec(dllexport)
#else
#define GEMLET_EXPORT __attribute__((visibility("default")))
#endif

/* The C API's functions (gemlet.h). */
#define GEMLET_API GEMLET_EXPORT
/* The C++ API's classes and free functions (gemlet.hpp). */
#define GEMLET_CXX_API GEMLET_EXPORT

#endif /* GEMLET_EXPORT_H_ */
