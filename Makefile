# dtrain's front door. `make demo` and `make test` install what is missing, build, and run.
BUILD      ?= build
ASAN_BUILD ?= build-asan
TSAN_BUILD ?= build-tsan
FUZZ_BUILD ?= build-fuzz
MPICH_BUILD ?= build-mpich
FUZZ_SECONDS ?= 60
FUZZ_READERS ?= idx csv config safetensors manifest
JOBS       ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_ARGS ?=
CTEST_ARGS ?=
# CI sets CI=true: warnings become errors there.
ifeq ($(CI),true)
  CMAKE_ARGS += -DDT_WERROR=ON
endif

# Open MPI refuses root without these; set here and in the test setup, never by the user.
export OMPI_ALLOW_RUN_AS_ROOT := 1
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM := 1

.PHONY: all deps build demo test test-long asan-build test-asan test-tsan test-mpich fuzz fuzz-ci check-accuracy mutants refs bench \
        package package-fresh \
        clean

all: build

deps:
	@scripts/install-deps.sh

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_ARGS)

build: deps $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

demo: build
	$(BUILD)/dtrain train examples/convnet.ini --progress

# The README's command: every capability at least once (under 15 minutes from a clean
# clone on 2 cores, builds included), then again under the sanitizers. The long tier
# (label long) holds the repetitions over more ranks, seeds and sizes: `make test-long`.
test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) -LE long $(CTEST_ARGS)
	$(MAKE) test-asan
	$(MAKE) test-tsan

# The long tier: the MPI tests at 4 and 5 ranks, the randomized tensor-parallel layout
# sweep at full size, and under the sanitizers the 3-rank runs `make test` leaves out
# (ASAN_LONG). CI runs it after `make test` (.ci/run).
test-long: build asan-build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) -L long $(CTEST_ARGS)
	cd $(ASAN_BUILD) && ctest --output-on-failure -j $(JOBS) -R '^($(ASAN_LONG))$$'

# Unit, gradient, reference and MPI tests again under AddressSanitizer +
# UndefinedBehaviorSanitizer, leaks included (the tests' environment names the
# suppressions: tests/lsan.supp, Open MPI's own). Not the tests that replace malloc
# (label alloc), the CLI tests (label cli), public_api (label api) or the long tier, and
# the MPI tests at 1-3 ranks only: 4 ranks add no code path 3 do not take (uneven splits
# start at 3) and would double the sanitizers' time on 2 cores. At 3 ranks, the
# collectives and tensor parallelism (uneven counts and splits) run here; the pipeline's,
# data parallelism's and the comm checks' 3-rank runs (ASAN_LONG) run in `make test-long`,
# so that `make test` stays under 15 minutes on 2 cores.
ASAN_LONG := test_pp_np3|test_dp_np3|test_comm_det_np3|test_comm_watchdog_np3|test_comm_check_np3
asan-build: deps
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DDT_SANITIZE=ON $(CMAKE_ARGS)
	cmake --build $(ASAN_BUILD) -j $(JOBS)

test-asan: asan-build
	cd $(ASAN_BUILD) && ctest --output-on-failure -j $(JOBS) -L 'unit|grad|ref|mpi' -LE 'long|alloc' \
	    -E '_np4$$|^($(ASAN_LONG))$$'

# The tests that run a model on a team of threads (label threads) under ThreadSanitizer,
# in a build of its own: it cannot share one with AddressSanitizer (tests/tsan.supp).
test-tsan: deps
	cmake -S . -B $(TSAN_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDT_SANITIZE_THREAD=ON \
	    $(CMAKE_ARGS)
	cmake --build $(TSAN_BUILD) -j $(JOBS)
	cd $(TSAN_BUILD) && ctest --output-on-failure -j $(JOBS) -L threads -LE 'long|alloc'

# The same code on MPICH (Debian's 4.0.2; the MPI standard is the contract, docs/comm.md):
# a build against it, and its MPI, command-line and install tests, the launcher MPICH's
# mpiexec (Hydra) behind tests/support/hydra.sh (the tests pass Open MPI's --oversubscribe
# and -x). Not the network-namespace hosts (they drive Open MPI's ssh agent) nor the long
# tier. Installing MPICH leaves Open MPI the system's default mpicc and mpirun.
test-mpich:
	@scripts/install-deps.sh --with-mpich
	cmake -S . -B $(MPICH_BUILD) -DCMAKE_BUILD_TYPE=Release -DMPI_C_COMPILER=/usr/bin/mpicc.mpich \
	    -DMPIEXEC_BIN=$(CURDIR)/tests/support/hydra.sh $(CMAKE_ARGS)
	cmake --build $(MPICH_BUILD) -j $(JOBS)
	cd $(MPICH_BUILD) && ctest --output-on-failure -j $(JOBS) -L 'mpi|cli|install' -LE long \
	    -E 'netns|hosts' $(CTEST_ARGS)

# libFuzzer on each input reader for FUZZ_SECONDS, in a clang build of its own, from a
# scratch copy of tests/fuzz/corpus; a crash fails it and names the reproducer.
fuzz:
	@scripts/install-deps.sh --with-fuzz
	CC=clang cmake -S . -B $(FUZZ_BUILD) -DCMAKE_C_COMPILER=clang \
	    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDT_FUZZ=ON $(CMAKE_ARGS)
	cmake --build $(FUZZ_BUILD) -j $(JOBS) --target $(addprefix fuzz_,$(FUZZ_READERS))
	tests/fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_SECONDS) $(FUZZ_READERS)

# CI's fuzzing: a fixed seed and number of runs per reader, from the committed corpus alone,
# so that the result depends neither on the machine's speed nor on an earlier run's finds.
fuzz-ci:
	rm -rf $(FUZZ_BUILD)/fuzz
	$(MAKE) fuzz FUZZ_SECONDS=900 FUZZ_ARGS="-seed=1 -runs=20000"

# The accuracy targets of README.md (slow: several epochs on three seeds).
check-accuracy: build
	scripts/check-accuracy.sh $(BUILD)/dtrain

# Plants each of scripts/mutants.py's one-line bugs in turn and checks that the tests catch
# it (about 23 minutes on 2 cores; not part of `make test`). MUTANTS=id,id runs only those.
mutants: build
	scripts/mutants.py --build $(BUILD) $(if $(MUTANTS),--only $(MUTANTS))

# Regenerates the PyTorch reference files under tests/ref and tests/e2e (needs
# python3-torch), then checks that PyTorch loads the weights dtrain writes.
refs: build
	scripts/install-deps.sh --with-torch
	/usr/bin/python3 tests/ref/gen_refs.py --dtrain $(BUILD)/dtrain
	/usr/bin/python3 tests/ref/gen_tfm_refs.py
	/usr/bin/python3 tests/ref/gen_gpt_refs.py
	/usr/bin/python3 tests/ref/gen_optim_refs.py
	/usr/bin/python3 tests/e2e/gen_e2e.py
	/usr/bin/python3 tests/ckpt/gen_export_ref.py
	/usr/bin/python3 tests/e2e/check_torch_loads.py $(BUILD)/dtrain

bench: build
	bench/run.sh $(BUILD)

# The Debian package $(BUILD)/dtrain_<version>_<arch>.deb: CPack over the install rules
# (cmake/install.cmake), its dependencies read off the binaries by dpkg-shlibdeps; then
# checked without installing it (tests/install/check-deb.sh: fields, files, the unpacked
# tool runs, apt resolves it on an empty system). Install it with
# `apt install ./$(BUILD)/dtrain_*.deb`.
package: build
	cd $(BUILD) && cpack -G DEB
	sh tests/install/check-deb.sh $(BUILD)

# The package installed on a fresh Debian 12 made by debootstrap, and run there (root and
# the network to a Debian mirror; a few minutes): tests/install/deb-fresh.sh.
package-fresh: package
	sh tests/install/deb-fresh.sh $(BUILD)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(TSAN_BUILD) $(FUZZ_BUILD)
