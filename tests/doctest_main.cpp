// The one main() shared by every doctest executable under tests/unit and tests/cli.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
