#!/usr/bin/env bash
# build.sh: the one entry point for people and CI.
#
#   ./build.sh deps        install what is missing (Debian/Ubuntu: Vulkan loader, lavapipe, validation
#                          layers, glslc, spirv-cross, Open MPI; macOS: nothing) and check that go is there
#   ./build.sh kernels     regenerate the compiled kernels (go generate ./kernels)
#   ./build.sh build       go build and go vet of both modules, bin/allreduce-perf, bin/gocoll-info
#   ./build.sh test        deps, gofmt, vet, the lean-module check, the build matrix, go test and go test -race
#                          of both modules, the MPI tests (-tags mpi, under mpirun; docs/MPI.md) beside the first
#                          (what CI runs; the larger suites on reduced budgets, the race run -short: README.md lists them)
#   ./build.sh tidy        go mod tidy of both modules
#   ./build.sh test-full   the same with GOCOLL_TEST_FULL=1 (every suite's full budget, random seeds, every case
#                          on lavapipe, the race run without -short, every MPI job and allreduce-perf test under
#                          -tags mpi), then the C shim's and the Vulkan backend's tests and a collective subset
#                          under AddressSanitizer (asan_test)
#   ./build.sh bench [go test flags]   collective benchmarks (BENCHTIME, default 10x), to stdout
#   ./build.sh device-bench [prepare|run|lavapipe]   the device benchmark (bench/device-bench.sh): build what
#                          a device tool call carries and print that call (docs/PERFORMANCE.md)
#   ./build.sh run [allreduce-perf flags]   deps, then build and run the main job
#                          (default flags: -g 4 -b 8 -e 8M -f 4; any flags given replace them all)
#
# Two modules: the library (github.com/gocoll/gocoll, the root) and the commands (github.com/gocoll/gocoll/cmd,
# in cmd/, with the CLI and plotting dependencies the library must not pull in). go.work joins them for
# development; from the root `./...` matches the library only, so every step names both: "${PKGS[@]}".
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"

# Every package of both modules, as patterns the go command takes from the root (through go.work).
PKGS=(./... ./cmd/...)

# Modules whose names mark what the library module must never require (issue: a lean `go get`): plotting,
# fonts, LaTeX, images, PDF, SVG.
HEAVY_MODULES='plot|font|latex|image|pdf|svg|freetype|/gg '

# Debian/Ubuntu packages the Vulkan backend, its tests and the kernel generator need, and Open MPI for
# the multi-process transport (package mpi, built with -tags mpi) and its tests.
APT_PACKAGES=(libvulkan-dev mesa-vulkan-drivers vulkan-validationlayers glslc spirv-cross libopenmpi-dev openmpi-bin pkg-config)

# The main job's default flags: a sweep that finishes in well under a minute on 2 cores with lavapipe.
RUN_DEFAULTS=(-g 4 -b 8 -e 8M -f 4)

usage() {
	cat <<'EOF'
usage: ./build.sh <command> [args]

commands:
  deps        install missing system packages (Debian/Ubuntu via apt-get; nothing on macOS); check go
  kernels     regenerate kernels (go generate ./kernels)
  build       go build and go vet of both modules (library and cmd), bin/allreduce-perf and bin/gocoll-info
  test        deps, gofmt check, go vet, the lean-module check (GOWORK=off go list -m all), CGO_ENABLED=0 /
              novulkan / darwin builds, go test and go test -race -short of both modules, and beside the
              first (which runs niced) go vet and go test -tags mpi of ./mpi and ./cmd/allreduce-perf's MPI
              tests (under mpirun); the larger suites run reduced budgets (README.md lists them): about
              about 11 minutes on 2 idle cores (644-725 s, warm cache)
  tidy        go mod tidy of the library module and of the cmd module
  test-full   as test, with GOCOLL_TEST_FULL=1: the full budgets (conformance and fault sessions, every
              strategy, rank count, type, trial and size on lavapipe too, both float32 kernel sets, the race
              run without -short, every MPI job whole and all allreduce-perf tests under -tags mpi), then
              go test -asan of ./cshim/ and ./vulkan/ (AddressSanitizer over the C shim)
  bench       go test -bench over ./collective/... (BENCHTIME=10x by default; extra args go to go test)
  run         deps, build and run cmd/allreduce-perf (args replace the defaults: -g 4 -b 8 -e 8M -f 4)
  device-bench  bench/device-bench.sh [prepare|run|lavapipe]: build the device benchmark and print the
              device tool call that runs it (see docs/PERFORMANCE.md)
EOF
}

# log prints a step's name after the seconds since build.sh started (where each step's time goes).
log() { printf '== [%ds] %s\n' "$SECONDS" "$*"; }
die() {
	printf 'build.sh: %s\n' "$*" >&2
	exit 1
}
have() { command -v "$1" >/dev/null 2>&1; }

need_go() {
	have go || die "go is not installed or not on PATH: install Go 1.26 or newer (https://go.dev/dl/) and retry"
}

# installed reports whether the Debian package $1 is installed.
installed() {
	dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'
}

cmd_deps() {
	need_go
	case "$(uname -s)" in
	Darwin)
		# Metal ships with macOS; the kernels' generated MSL is checked in.
		return 0
		;;
	Linux) ;;
	*)
		log "deps: $(uname -s) is not handled; install a Vulkan loader and driver by hand (or use the host backend)"
		return 0
		;;
	esac
	if ! have dpkg-query || ! have apt-get; then
		log "deps: not Debian/Ubuntu; install by hand if missing: ${APT_PACKAGES[*]}"
		return 0
	fi
	local missing=() p
	for p in "${APT_PACKAGES[@]}"; do
		installed "$p" || missing+=("$p")
	done
	[ ${#missing[@]} -eq 0 ] && return 0

	local sudo=()
	if [ "$(id -u)" -ne 0 ]; then
		have sudo || die "missing packages (${missing[*]}) and not root, and sudo is not available"
		sudo=(sudo)
	fi
	log "deps: installing ${missing[*]}"
	"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q
	# Install what the configured sources have; name what they lack instead of failing on it
	# (older releases package glslc or the validation layers differently).
	local avail=()
	for p in "${missing[@]}"; do
		if apt-cache show "$p" >/dev/null 2>&1; then
			avail+=("$p")
		else
			log "deps: $p is not in this system's apt sources; install it by hand"
		fi
	done
	if [ ${#avail[@]} -gt 0 ]; then
		"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${avail[@]}"
	fi
}

cmd_kernels() {
	need_go
	go generate ./kernels
}

cmd_build() {
	need_go
	log "go build ${PKGS[*]}"
	go build "${PKGS[@]}"
	mkdir -p bin
	go build -o bin/allreduce-perf ./cmd/allreduce-perf
	go build -o bin/gocoll-info ./cmd/gocoll-info
	log "built bin/allreduce-perf bin/gocoll-info"
	log "go vet ${PKGS[*]}"
	go vet "${PKGS[@]}"
}

# lean_check fails when the library module, as a user's `go get` sees it (no go.work), requires a plotting,
# font, image or PDF module: those belong to the cmd module.
lean_check() {
	log "GOWORK=off go list -m all (the library module: no plotting, font, image or PDF module)"
	local mods heavy
	mods=$(GOWORK=off go list -m all)
	heavy=$(printf '%s\n' "$mods" | grep -E "$HEAVY_MODULES" || true)
	if [ -n "$heavy" ]; then
		printf 'build.sh: the library module requires modules that belong in cmd/go.mod:\n%s\n' "$heavy" >&2
		exit 1
	fi
}

# cmd_tidy runs go mod tidy in both modules. The cmd module requires the library at the version it will be
# released with; until that version is published, tidy reads the library from ../ through a replace that
# it drops again (go.mod stays replace-free, so `go install .../cmd/allreduce-perf@version` works).
cmd_tidy() {
	need_go
	log "go mod tidy (library module)"
	GOWORK=off go mod tidy
	local v
	v=$(cd cmd && go mod edit -print | awk '$1 == "github.com/gocoll/gocoll" { print $2 }')
	[ -n "$v" ] || die "cmd/go.mod does not require github.com/gocoll/gocoll"
	if (cd cmd && GOWORK=off timeout 60 go mod download github.com/gocoll/gocoll@"$v") >/dev/null 2>&1; then
		log "go mod tidy (cmd module, library $v)"
		(cd cmd && GOWORK=off go mod tidy)
	else
		log "go mod tidy (cmd module, library $v unpublished: read from ../)"
		(
			cd cmd
			go mod edit -replace github.com/gocoll/gocoll@"$v"=../
			trap 'go mod edit -dropreplace github.com/gocoll/gocoll@'"$v" EXIT
			GOWORK=off go mod tidy
		)
	fi
}

# fmt_check fails listing every Go file gofmt would change (hidden folders, vendor and testdata aside;
# -mindepth 1: "." itself matches '.*', and pruning it would check nothing).
fmt_check() {
	local files
	files=$(find . -mindepth 1 \( -name '.*' -o -name vendor -o -name testdata \) -prune -o -type f -name '*.go' -print |
		xargs -r gofmt -l)
	if [ -n "$files" ]; then
		printf 'build.sh: gofmt would change these files (run gofmt -w on them):\n%s\n' "$files" >&2
		exit 1
	fi
}

# Settings for lavapipe on small CI machines: at most 2 worker threads, and Mesa's shader cache on
# (~/.cache/mesa_shader_cache, or $MESA_SHADER_CACHE_DIR): without it every device a test opens compiles
# its kernels' pipelines again, most of the Vulkan tests' time; with it each is compiled once (entries
# are keyed by the driver build and the SPIR-V, so regenerated kernels miss). Set
# MESA_SHADER_CACHE_DISABLE=true to compile every time.
ci_env() {
	# -trimpath: build outputs do not depend on the checkout's path, so a fresh
	# clone (what CI tests) reuses the build cache an earlier checkout filled.
	case " ${GOFLAGS:-} " in *" -trimpath "*) ;; *) export GOFLAGS="${GOFLAGS:+$GOFLAGS }-trimpath" ;; esac
	export MESA_SHADER_CACHE_DISABLE="${MESA_SHADER_CACHE_DISABLE:-false}"
	export LP_NUM_THREADS="${LP_NUM_THREADS:-2}"
}

cmd_test() {
	cmd_deps
	ci_env
	log "gofmt"
	fmt_check
	log "go vet ${PKGS[*]}"
	go vet "${PKGS[@]}"
	lean_check
	cshim_warnings
	log "CGO_ENABLED=0 go build ${PKGS[*]}"
	CGO_ENABLED=0 go build "${PKGS[@]}"
	log "go build -tags novulkan ${PKGS[*]}"
	go build -tags novulkan "${PKGS[@]}"
	log "GOOS=darwin CGO_ENABLED=0 go build ${PKGS[*]}"
	GOOS=darwin CGO_ENABLED=0 go build "${PKGS[@]}"
	log "GOOS=darwin CGO_ENABLED=0 go vet ${PKGS[*]}"
	GOOS=darwin CGO_ENABLED=0 go vet "${PKGS[@]}"
	# The MPI tests (mpi_test) run beside go test -count=1, their output to a
	# file printed whole once both have ended. Their jobs wait on each other
	# (more processes than cores) and carry time limits (docs/MPI.md): go test
	# runs at the lowest priority (nice), so that they run as if alone and it
	# takes the processor time they leave.
	bg_start mpi_test
	local nice=()
	have nice && nice=(nice -n 19)
	# The full matrix runs without the race detector; the race run checks
	# synchronisation on a trimmed matrix (the race detector checks
	# concurrency, not arithmetic, and slows element loops tenfold): -short
	# also trims the backend suites' size matrix and the repeated races
	# (test-full runs them whole).
	local pkgs=() p
	# (a plain loop: macOS's bash 3.2 has no mapfile)
	while IFS= read -r p; do pkgs+=("$p"); done < <(test_order "${PKGS[@]}")
	log "go test -count=1 ${PKGS[*]}"
	${nice[@]+"${nice[@]}"} go test -count=1 -timeout 25m "${pkgs[@]}"
	log "go test -count=1 passed; waiting for $bg_name"
	bg_wait
	local short=(-short)
	[ -n "${GOCOLL_TEST_FULL:-}" ] && short=()
	# kernels holds no concurrency (Go models of the kernels' arithmetic and
	# the generated-code check): the race run leaves it out, unless full.
	local race_pkgs=("${pkgs[@]}")
	if [ -z "${GOCOLL_TEST_FULL:-}" ]; then
		race_pkgs=()
		while IFS= read -r p; do race_pkgs+=("$p"); done < <(printf '%s\n' "${pkgs[@]}" | grep -v '/kernels$')
	fi
	# The example modules' tests (examples_test, niced) run beside the race
	# run, on the processor time its longest package leaves at its end.
	bg_start examples_test
	# GORACE atexit_sleep_ms: the race detector's wait at each test binary's
	# exit for goroutines still running to report (1 s by default; over 63
	# binaries, about a minute of the run) shortened to 0.1 s; a GORACE of
	# one's own replaces it.
	log "go test -race ${short[*]} -count=1 (${#race_pkgs[@]} packages: all but kernels unless full)"
	GORACE="${GORACE:-atexit_sleep_ms=100}" go test -race "${short[@]}" -count=1 -timeout 25m "${race_pkgs[@]}"
	log "go test -race passed; waiting for $bg_name"
	bg_wait
	log "test: passed"
}

# LONG_TESTS are the packages whose tests take minutes, longest first (README.md, test time).
LONG_TESTS=(collective cmd/allreduce-perf vulkan ddp kernels host)

# test_order lists the packages of the patterns given with LONG_TESTS first: go test starts
# packages' tests in the order named, as many at once as there are cores, so a long one named
# last (./cmd/... comes after the library) would run on its own at the end beside an idle core.
test_order() {
	local all p
	all=$(go list "$@")
	for p in "${LONG_TESTS[@]}"; do
		printf '%s\n' "$all" | grep -E "^github.com/gocoll/gocoll/$p\$" || true
	done
	printf '%s\n' "$all" | grep -vE "^github.com/gocoll/gocoll/($(
		IFS='|'
		echo "${LONG_TESTS[*]}"
	))\$"
}

# bg_start runs the function $1 in the background, its output to a file, in a process group of its
# own (set -m), so that bg_stop can end it with everything it started (mpirun and its processes) if
# the build fails or is interrupted first; bg_wait waits for it, prints its output and fails if it did.
bg_name="" bg_pid="" bg_log=""
bg_start() {
	bg_name=$1
	bg_log=$(mktemp "${TMPDIR:-/tmp}/gocoll-$1.XXXXXX")
	log "$bg_name: in the background (its output follows when it ends)"
	set -m
	"$1" >"$bg_log" 2>&1 &
	bg_pid=$!
	set +m
	trap bg_stop EXIT
}
bg_wait() {
	local rc=0
	wait "$bg_pid" || rc=$?
	bg_pid=""
	log "$bg_name: the output of the background run"
	cat "$bg_log"
	rm -f "$bg_log"
	[ "$rc" -eq 0 ] || die "$bg_name failed (exit status $rc)"
}
bg_stop() {
	[ -n "$bg_pid" ] || return 0
	kill -TERM -- -"$bg_pid" 2>/dev/null || true
	wait "$bg_pid" 2>/dev/null || true
	printf 'build.sh: %s stopped, the build having failed first; its output so far:\n' "$bg_name" >&2
	cat "$bg_log" >&2
	rm -f "$bg_log"
}

# examples_test vets and tests the example modules that live outside the library module (their dependencies,
# e.g. gorgonia, must never reach the library's go.mod), each on its own (GOWORK=off, a replace to ../..).
# They run at the lowest priority (nice), beside the race run (cmd_test).
examples_test() {
	local m nice=()
	have nice && nice=(nice -n 19)
	for m in examples/gorgonia; do
		log "(cd $m; GOWORK=off go vet ./... && go test -count=1 ./...)"
		(cd "$m" && GOWORK=off ${nice[@]+"${nice[@]}"} go vet ./... &&
			GOWORK=off ${nice[@]+"${nice[@]}"} go test -count=1 -timeout 10m ./...) || die "$m failed"
	done
}

# cshim_warnings builds the C shim (vulkan.c and the cgo code around it, with and without Vulkan) with
# its -Wall -Wextra (cshim/cshim.go) and -Werror, so that any warning fails the build.
cshim_warnings() {
	log "C shim: -Wall -Wextra -Werror"
	CGO_CFLAGS="${CGO_CFLAGS:--O2 -g} -Werror" go build ./cshim/
	CGO_CFLAGS="${CGO_CFLAGS:--O2 -g} -Werror" go build -tags novulkan ./cshim/
}

# asan_test runs the C shim's and the Vulkan backend's tests (lavapipe, validation layer) with
# AddressSanitizer and LeakSanitizer in the C code: go test -asan, built with gcc (Debian's gcc finds
# its libasan; -asan with clang would need libclang-rt). test-full only: it takes minutes.
asan_test() {
	if ! have gcc; then
		die "asan_test needs gcc (with libasan, Debian's gcc package) for go test -asan"
	fi
	log "CC=gcc go test -asan -count=1 ./cshim/ ./vulkan/"
	CC=gcc go test -asan -count=1 -timeout 20m ./cshim/ ./vulkan/
	# A collective subset over the shim: conformance sessions, the ownership
	# and async tests, pinned buffers.
	log "CC=gcc go test -asan ./collective/ (subset)"
	CC=gcc go test -asan -count=1 -timeout 20m ./collective/ \
		-run 'TestConformance$|TestDirectCancelled|TestPipelinedSmall|TestAsync|TestAbort|TestSliceAgainst|TestSendRecv|HostBuffer' \
		-conformance.cases=60
}

# mpi_test vets and tests the multi-process build (-tags mpi): the mpi package's tests start themselves
# under mpirun for 2, 3 and 4 processes, and allreduce-perf's run under mpirun (docs/MPI.md): its tests
# of the mpi build only (the others ran without the tag), all of them when full. Where deps installs
# Open MPI (Debian/Ubuntu) it must be there; elsewhere, without mpirun, the step is skipped.
mpi_test() {
	if ! have mpirun || ! pkg-config --exists ompi-c 2>/dev/null; then
		if have dpkg-query && have apt-get; then
			die "mpirun or Open MPI's pkg-config file (ompi-c) is missing although deps installs libopenmpi-dev openmpi-bin: run ./build.sh deps"
		fi
		log "MPI tests SKIPPED: mpirun or pkg-config ompi-c not found (install Open MPI to run them; see docs/MPI.md)"
		return 0
	fi
	log "go vet -tags mpi ./mpi/... ./cmd/..."
	go vet -tags mpi ./mpi/... ./cmd/...
	log "go test -count=1 -tags mpi ./mpi/..."
	go test -count=1 -timeout 10m -tags mpi ./mpi/...
	local run=(-run 'MPI|Mpirun')
	[ -n "${GOCOLL_TEST_FULL:-}" ] && run=()
	log "go test -count=1 -tags mpi ${run[*]} ./cmd/allreduce-perf/..."
	go test -count=1 -timeout 10m -tags mpi ${run[@]+"${run[@]}"} ./cmd/allreduce-perf/...
}

cmd_bench() {
	need_go
	ci_env
	go test -run '^$' -bench . -benchtime="${BENCHTIME:-10x}" "$@" ./collective/...
}

cmd_run() {
	cmd_deps
	mkdir -p bin
	go build -o bin/allreduce-perf ./cmd/allreduce-perf
	if [ $# -eq 0 ]; then
		set -- "${RUN_DEFAULTS[@]}"
	fi
	log "bin/allreduce-perf $*"
	exec ./bin/allreduce-perf "$@"
}

[ $# -ge 1 ] || {
	usage >&2
	exit 2
}
cmd=$1
shift
case "$cmd" in
deps) cmd_deps ;;
kernels) cmd_kernels ;;
tidy) cmd_tidy ;;
build) cmd_build ;;
test) cmd_test ;;
test-full)
	export GOCOLL_TEST_FULL=1
	cmd_test
	asan_test
	;;
bench) cmd_bench "$@" ;;
run) cmd_run "$@" ;;
device-bench) exec bash bench/device-bench.sh "$@" ;;
-h | --help | help) usage ;;
*)
	printf 'build.sh: unknown command %q\n' "$cmd" >&2
	usage >&2
	exit 2
	;;
esac
