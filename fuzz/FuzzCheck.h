// What the fuzz targets hold the readers to besides "no crash, no sanitizer report": a
// broken property aborts with its message, which libFuzzer reports as a finding and keeps.
#pragma once

#include <cstdio>
#include <cstdlib>

#define FUZZ_CHECK(condition, what)                                                                  \
    do {                                                                                             \
        if (!(condition)) {                                                                          \
            std::fprintf(stderr, "fuzz property broken: %s (%s:%d)\n", what, __FILE__, __LINE__);  \
            std::abort();                                                                            \
        }                                                                                            \
    } while (0)
