// The Catch2 v2 entry point for halfgrad_tests; the tests live beside it, one file per source file.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
