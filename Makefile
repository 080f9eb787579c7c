# SPDX-License-Identifier: MIT
# The README's two commands: `make demo` and `make test`. Both install what they need first.
#   make demo   release build, then the main job on the embedded default store
#   make test   ASan+UBSan build (warnings as errors), then every test not labelled slow
#   make test-slow   the same, then the slow tests (big files, 30k-file mounts, TSan, .deb)
#   make build  release build only            make fuzz   libFuzzer targets for a fixed time
#   make deb    the Debian package            make bench  the benchmark suite (bench/run.sh)
JOBS ?= $(shell nproc)
BUILD ?= build
TEST_BUILD ?= build-asan
# Extra CMake arguments, e.g. CMAKE_ARGS='-DLC_SWIFT_PORT=28480 -DLC_S3RVER_PORT=28490'.
CMAKE_ARGS ?=

.PHONY: all deps build test test-slow demo fuzz deb bench clean

all: build

deps:
	@.ci/install-deps.sh

build: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLC_WERROR=ON -DLC_BUILD_TESTS=OFF $(CMAKE_ARGS) >/dev/null
	cmake --build $(BUILD) -j $(JOBS)

# -g1 (line tables only): sanitizer reports still name file and line, and the build that CI does
# from nothing costs about a quarter less compiler time than with -g (measured on 8 sample files).
test: deps
	cmake -S . -B $(TEST_BUILD) -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS="-O1" -DCMAKE_CXX_FLAGS_DEBUG="-g1" \
	  -DLC_SANITIZE=address,undefined -DLC_WERROR=ON $(CMAKE_ARGS) >/dev/null
	cmake --build $(TEST_BUILD) -j $(JOBS)
	cd $(TEST_BUILD) && ctest --output-on-failure -j $(JOBS) --timeout 900 -LE slow

# The long tests: files over 4 GiB, 30,000-file mounts, the full fault matrix, the TSan pass
# (its own build), the .deb install. Same build as `make test`; run before a release.
test-slow: test
	cd $(TEST_BUILD) && ctest --output-on-failure -j 1 --timeout 1800 -L slow

demo: build
	tools/demo.sh $(BUILD)/tools/lazycache

fuzz: deps
	.ci/fuzz.sh

deb: build
	cd $(BUILD) && cpack -G DEB

bench: build
	bench/run.sh

clean:
	rm -rf $(BUILD) $(TEST_BUILD) build-fuzz
