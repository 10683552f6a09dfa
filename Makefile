# rrpc make build. Configure first: sh config_brpc.sh [--with-rdma].
#
#   make              libraries (static and shared), tests, examples, tools
#   make test         run the host test suite (no RDMA device needed), the
#                     binaries in parallel (TEST_JOBS, default nproc)
#   make install PREFIX=/usr/local [DESTDIR=]   headers, libraries, rrpc.pc,
#                     CMake package (docs/building.md, "Using an installed rrpc")
#   make TSAN=1 test-rdma-tsan   the RDMA test binaries under ThreadSanitizer
#   make test-rdma    run the RDMA suite: on a real device if one is active,
#                     otherwise inside the Soft-RoCE VM (tools/rxe-vm)
#   make SAN=1 ...    the same under ASan+UBSan, outputs in build/san
#   make TSAN=1 ...   the same under ThreadSanitizer, outputs in build/tsan
#   make fuzz         libFuzzer targets (clang), outputs in build/fuzz
#   make test-kernel-smc   kernel AF_SMC peers over SMC-R in two VMs (docs/kernel-smc.md)
#
# Sources are found by directory, so adding a file needs no edit here:
#   src/rrpc/{core,remote,rpc,client,builtin}/*.c transport/*.c transport/smc/*.c transport/tcp/*.c transport/rdma/wire/*.c -> librrpc.a
#   transport/rdma/{,imm/,brpc/,cm/,cursor/,remote/}*.c transport/smc/stream/*.c (only WITH_RDMA=1)
#     or transport/rdma/none/*.c transport/smc/stream/none/*.c
#   src/rrpc/cxx/*.cc + src/rrpc/cxx/*.proto                 -> librrpc_cxx.a
#   src/rrpc/flags/*.cc (the flags brpc also defines)        -> librrpc_flags.a
#   (each library also as lib<name>.so.VERSION, soname lib<name>.so.MAJOR)
#   test/*_unittest.cc    -> build/test/<name>      (+ test/*.proto, test/common/*.cc)
#   test/adversarial/*_test.cc -> build/test/adversarial/<name> (hostile peers; run by make test)
#   test/rdma/*_test.cc   -> build/test/rdma/<name> (only WITH_RDMA=1)
#   test/coexist/         -> build/test/coexist/* (rules in test/coexist/coexist.mk)
#   test/tools/*_test.sh  run by make test as they are
#   test/fuzz/*_fuzzer.c  -> build/fuzz/<name>
#   examples/<ex>/*.{c,cpp,cc} with main -> build/examples/<ex>/<file> (+ <ex>/*.proto)
#   bench/*.cc            -> build/bench/<name>
#   tools/<t>/*.c         -> build/tools/<t> (plain C, no library)

ifeq ($(wildcard config.mk),)
$(error config.mk is missing: run 'sh config_brpc.sh' (add --with-rdma for RDMA) first)
endif
include config.mk

BUILD := build
ifeq ($(SAN),1)
BUILD := build/san
SANFLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
endif
ifeq ($(TSAN),1)
BUILD := build/tsan
SANFLAGS := -fsanitize=thread -fno-omit-frame-pointer
# A race fails the test binary at once (the report is the failure).
export TSAN_OPTIONS ?= halt_on_error=1 second_deadlock_stack=1
endif
OPT ?= -O2

CPPFLAGS := -Isrc -I. -I$(BUILD)/gen -D_GNU_SOURCE $(EXTRA_CPPFLAGS)
CFLAGS := -std=c11 -Wall -Wextra -Werror -g $(OPT) -fPIC $(SANFLAGS) -MMD -MP
CXXFLAGS := -std=c++17 -Wall -Wextra -Werror -g $(OPT) -fPIC $(SANFLAGS) -MMD -MP
LDFLAGS := $(EXTRA_LDFLAGS) $(SANFLAGS)
LDLIBS := -lpthread
CXXLIBS := -lgflags -lglog -lprotobuf -lpthread

CORE_SRCS := $(wildcard src/rrpc/core/*.c src/rrpc/remote/*.c src/rrpc/rpc/*.c src/rrpc/client/*.c src/rrpc/builtin/*.c transport/*.c transport/smc/*.c transport/tcp/*.c transport/rdma/wire/*.c)
ifeq ($(WITH_RDMA),1)
CORE_SRCS += $(wildcard transport/rdma/*.c transport/rdma/imm/*.c transport/rdma/brpc/*.c transport/rdma/cm/*.c transport/rdma/cursor/*.c transport/rdma/remote/*.c transport/smc/stream/*.c)
CPPFLAGS += -DRRPC_WITH_RDMA=1
LDLIBS += -lrdmacm -libverbs
else
CORE_SRCS += $(wildcard transport/rdma/none/*.c transport/smc/stream/none/*.c)
endif
CXX_SRCS := $(wildcard src/rrpc/cxx/*.cc)
CXX_PROTOS := $(wildcard src/rrpc/cxx/*.proto)
FLAGS_SRCS := $(wildcard src/rrpc/flags/*.cc)

# The release, from the header that also gives it to programs.
version_part = $(shell sed -n 's/^\#define RRPC_VERSION_$(1) \([0-9]*\)$$/\1/p' src/rrpc/version.h)
VERSION := $(call version_part,MAJOR).$(call version_part,MINOR).$(call version_part,PATCH)
SOMAJOR := $(call version_part,MAJOR)

obj = $(patsubst %,$(BUILD)/obj/%.o,$(1))
pbcc = $(patsubst %.proto,$(BUILD)/gen/%.pb.cc,$(1))

CORE_OBJS := $(call obj,$(CORE_SRCS))
CXX_OBJS := $(call obj,$(call pbcc,$(CXX_PROTOS)) $(CXX_SRCS))
FLAGS_OBJS := $(call obj,$(FLAGS_SRCS))
LIBRRPC := $(BUILD)/librrpc.a
LIBRRPC_CXX := $(BUILD)/librrpc_cxx.a
LIBRRPC_FLAGS := $(BUILD)/librrpc_flags.a
SHARED_LIBS := $(patsubst %.a,%.so,$(LIBRRPC) $(LIBRRPC_CXX) $(LIBRRPC_FLAGS))

TEST_PROTOS := $(wildcard test/*.proto)
TEST_COMMON := $(call obj,$(call pbcc,$(TEST_PROTOS)) $(wildcard test/common/*.cc))
TESTS := $(patsubst test/%.cc,$(BUILD)/test/%,$(wildcard test/*_unittest.cc test/adversarial/*_test.cc))
ifeq ($(WITH_RDMA),1)
RDMA_TESTS := $(patsubst test/rdma/%.cc,$(BUILD)/test/rdma/%,$(wildcard test/rdma/*_test.cc))
# Allocation failures injected by the linker, in this test binary only (no hook in librrpc).
$(BUILD)/test/rdma/oom_rdma_test: LDFLAGS += -Wl,--wrap=rrpc_iobuf_move
# The SMC stream's flow control against a scripted kernel peer: its CDC sends and waits go to
# the test (no verbs), the rest of transport/smc/stream/ is the library's.
$(BUILD)/test/smc_stream_flow_unittest: LDFLAGS += -Wl,--wrap=rrpc__ss_send_cdc -Wl,--wrap=rrpc__ss_progress
endif
# Test and bench objects are kept (make would delete them as intermediates of
# the pattern rules, and every later run would compile them again).
.SECONDARY: $(TEST_COMMON) $(call obj,$(wildcard test/*_unittest.cc test/rdma/*_test.cc bench/*.cc))

EXAMPLE_DIRS := $(patsubst %/,%,$(wildcard examples/*/))
# Every C/C++ file of an example that defines main() becomes a program.
MAIN_RE := ^int main[(]
EXAMPLE_MAINS := $(shell grep -lE '$(MAIN_RE)' $(wildcard examples/*/*.c examples/*/*.cc examples/*/*.cpp) /dev/null 2>/dev/null)
EXAMPLE_BINS := $(foreach f,$(EXAMPLE_MAINS),$(BUILD)/$(basename $(f)))
GEN_HDRS := $(patsubst %.proto,$(BUILD)/gen/%.pb.h,$(CXX_PROTOS) $(TEST_PROTOS) $(wildcard examples/*/*.proto))

BENCHES := $(patsubst bench/%.cc,$(BUILD)/bench/%,$(wildcard bench/*.cc))
TOOL_DIRS := $(patsubst %/,%,$(dir $(wildcard tools/*/*.c)))
TOOLS := $(sort $(patsubst tools/%,$(BUILD)/tools/%,$(TOOL_DIRS)))

.PHONY: all libs tests rdma-tests examples benches tools test test-rdma test-rdma-tsan test-rdma-siw fuzz bench clean install remote-write-bench
all: libs tests examples benches tools $(RDMA_TESTS)
# The RDMA test binaries alone (tools/test-all builds the TSan ones with the TSan step).
rdma-tests: $(RDMA_TESTS)
tools: $(TOOLS)
define tool_rule
$(BUILD)/tools/$(1): $(wildcard tools/$(1)/*.c)
	@mkdir -p $$(@D)
	$$(CC) $$(CPPFLAGS) $$(filter-out -MMD -MP,$$(CFLAGS)) $$(LDFLAGS) -o $$@ $$(filter %.c,$$^)
endef
$(foreach t,$(notdir $(TOOL_DIRS)),$(eval $(call tool_rule,$(t))))
benches: $(BENCHES)
libs: $(LIBRRPC) $(LIBRRPC_CXX) $(LIBRRPC_FLAGS) $(SHARED_LIBS)
tests: $(TESTS)
examples: $(EXAMPLE_BINS)

$(LIBRRPC): $(CORE_OBJS)
	@mkdir -p $(@D)
	rm -f $@ && $(AR) rcs $@ $^
$(LIBRRPC_CXX): $(CXX_OBJS)
	@mkdir -p $(@D)
	rm -f $@ && $(AR) rcs $@ $^
$(LIBRRPC_FLAGS): $(FLAGS_OBJS)
	@mkdir -p $(@D)
	rm -f $@ && $(AR) rcs $@ $^

# Shared libraries: lib<name>.so.VERSION with soname lib<name>.so.MAJOR, and
# the two links to it. Each names the libraries it needs (DT_NEEDED).
so_rule = $(CXX) -shared $(LDFLAGS) -Wl,-soname,$(notdir $@).$(SOMAJOR) -o $@.$(VERSION)
so_links = ln -sf $(notdir $@).$(VERSION) $@.$(SOMAJOR) && ln -sf $(notdir $@).$(SOMAJOR) $@
$(BUILD)/librrpc.so: $(CORE_OBJS)
	$(so_rule) $^ $(LDLIBS) && $(so_links)
# $ORIGIN: librrpc_cxx finds librrpc beside itself, built or installed.
$(BUILD)/librrpc_cxx.so: $(CXX_OBJS) $(BUILD)/librrpc.so
	$(so_rule) $(CXX_OBJS) -L$(BUILD) -lrrpc -Wl,-rpath,'$$ORIGIN' $(CXXLIBS) $(LDLIBS) && $(so_links)
$(BUILD)/librrpc_flags.so: $(FLAGS_OBJS)
	$(so_rule) $^ -lgflags && $(so_links)

# Generated protobuf code; every object waits for all generated headers, and
# none of it is an intermediate file for make to delete.
.SECONDARY: $(GEN_HDRS) $(GEN_HDRS:.pb.h=.pb.cc)
$(BUILD)/gen/%.pb.cc $(BUILD)/gen/%.pb.h: %.proto
	@mkdir -p $(@D)
	protoc --cpp_out=$(BUILD)/gen $<
$(BUILD)/obj/%.c.o: %.c
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) -c $< -o $@
$(BUILD)/obj/%.cc.o: %.cc | $(GEN_HDRS)
	@mkdir -p $(@D)
	$(CXX) $(CPPFLAGS) $(CXXFLAGS) -c $< -o $@
$(BUILD)/obj/%.cpp.o: %.cpp | $(GEN_HDRS)
	@mkdir -p $(@D)
	$(CXX) $(CPPFLAGS) $(CXXFLAGS) -c $< -o $@
# Generated sources compile with warnings relaxed: protoc's output is not ours.
$(BUILD)/obj/$(BUILD)/gen/%.pb.cc.o: $(BUILD)/gen/%.pb.cc | $(GEN_HDRS)
	@mkdir -p $(@D)
	$(CXX) $(CPPFLAGS) $(filter-out -Werror,$(CXXFLAGS)) -c $< -o $@

$(BUILD)/bench/%: $(BUILD)/obj/bench/%.cc.o $(FLAGS_OBJS) $(LIBRRPC_CXX) $(LIBRRPC)
	@mkdir -p $(@D)
	$(CXX) $(LDFLAGS) -o $@ $^ $(CXXLIBS) $(LDLIBS)

bench: benches
	$(BUILD)/bench/loopback_bench

GTEST_LIBS := -lgtest_main -lgtest
$(BUILD)/test/%: $(BUILD)/obj/test/%.cc.o $(TEST_COMMON) $(FLAGS_OBJS) $(LIBRRPC_CXX) $(LIBRRPC)
	@mkdir -p $(@D)
	$(CXX) $(LDFLAGS) -o $@ $^ $(GTEST_LIBS) $(CXXLIBS) $(LDLIBS)

# Examples: the program's own file + the example's protos + helpers in the
# same directory that have no main().
define example_rule
$(BUILD)/$(basename $(1)): $(call obj,$(1)) \
    $(call obj,$(call pbcc,$(wildcard $(dir $(1))*.proto))) \
    $(call obj,$(filter-out $(EXAMPLE_MAINS),$(wildcard $(dir $(1))*.c $(dir $(1))*.cc $(dir $(1))*.cpp))) \
    $(FLAGS_OBJS) $(LIBRRPC_CXX) $(LIBRRPC)
	@mkdir -p $$(@D)
	$$(CXX) $$(LDFLAGS) -o $$@ $$^ $$(CXXLIBS) $$(LDLIBS)
endef
$(foreach f,$(EXAMPLE_MAINS),$(eval $(call example_rule,$(f))))
# Examples are built the way a service is built for production, and the way
# brpc builds its own examples (their Makefiles add -DNDEBUG -O2): with
# NDEBUG, so protobuf's generated code drops its debug-only checks (the
# dynamic_cast asserts in CallMethod, the UTF-8 check on serialize; ~350
# instructions a call on the rdma_performance server). The library, the tests
# and the benches keep theirs.
EXAMPLE_OBJS := $(call obj,$(wildcard examples/*/*.c examples/*/*.cc examples/*/*.cpp) \
    $(call pbcc,$(wildcard examples/*/*.proto)))
$(EXAMPLE_OBJS): CPPFLAGS += -DNDEBUG

# The test programs' own code (test/, not the library it tests, which stays
# at -O2) compiles at -Og, and at -O0 under the sanitizers. gtest's macros
# make large functions that the optimiser and the sanitizers' instrumentation
# take long over, and test code was 77 % of the plain build's compile time:
# test/loop_unittest.cc takes 14.0 s at -O2, 7.9 s at -Og, 6.9 s at -O0;
# test/rpc_unittest.cc under ASan 15.7 s at -O2, 3.9 s at -O0. -Og keeps the
# warnings that need the optimiser's data flow (-Wmaybe-uninitialized) in
# one build, and code fast enough for the tests' own loops.
TEST_OPT := -Og
ifneq ($(SAN)$(TSAN),)
TEST_OPT := -O0
endif
$(BUILD)/obj/test/%.o: CFLAGS += $(TEST_OPT)
$(BUILD)/obj/test/%.o: CXXFLAGS += $(TEST_OPT)

include preload/policy.mk

include test/coexist/coexist.mk
include tools/install.mk
include preload/preload.mk

# Test programs run side by side; each one's output goes to a log that is
# printed whole once it ends (tools/run-tests). test/tools/*_test.sh test the
# tools and examples themselves (RRPC_BUILD says where the examples are);
# they run in the plain build only, so SAN/TSAN builds do not compile the
# examples for them.
ifeq ($(BUILD),build)
SCRIPT_TESTS := $(wildcard test/tools/*_test.sh)
test: examples $(SHARED_LIBS)
endif
# builtin_unittest runs tools/rrpc_stat against a live server.
test: tests tools
	TEST_LOG_DIR=$(BUILD)/test-logs RRPC_BUILD=$(BUILD) \
	  tools/run-tests $(TESTS) $(COEXIST_TESTS) $(SCRIPT_TESTS) $(PRELOAD_TEST_SCRIPTS)

# The RDMA suite, the live Wireshark check and the idle_conns smoke, in one VM boot (or on a real port).
# The loop watchdog is strict there (a callback over its TCG-scaled bound fails the binary;
# RRPC_LOOP_WATCHDOG_STRICT=0 makes it report-only). Under TSan it stays report-only: the brpc
# dialect's receive poll and device_test's async-event storm still exceed it (docs/threads.md).
RDMA_WATCHDOG := RRPC_LOOP_WATCHDOG_STRICT=$${RRPC_LOOP_WATCHDOG_STRICT:-1}
RDMA_TSAN_WATCHDOG := RRPC_LOOP_WATCHDOG_STRICT=$${RRPC_LOOP_WATCHDOG_STRICT:-0}
test-rdma: $(RDMA_TESTS) examples tools $(BUILD)/bench/idle_conns preload $(BUILD)/test/preload/hostile_clc
	$(RDMA_WATCHDOG) tools/run-rdma-tests $(RDMA_TESTS) test/tshark/live-capture.sh test/rdma/idle-conns-smoke.sh test/rdma/thousand-conns.sh test/rdma/ring-mode.sh test/rdma/polling-mode.sh test/rdma/cm-mode.sh test/rdma/cursor-mode.sh test/preload/preload_test.sh test/preload/erm_test.sh test/preload/hostile_vm.sh

# examples/remote_write beside perftest's ib_write_bw (1 MiB writes), in one
# Soft-RoCE VM boot, alternating RW_RUNS times (3): each run's bandwidths,
# ratio and CPU per GiB of both sides of both, then every run again.
remote-write-bench: $(BUILD)/examples/remote_write/server $(BUILD)/examples/remote_write/client
	tools/rxe-vm --timeout 900 -- env RRPC_BUILD=$(BUILD) RW_MIB=$${RW_MIB:-256} RW_RUNS=$${RW_RUNS:-3} \
	  examples/remote_write/vs-ib-write-bw.sh

# The RDMA test binaries alone, for `make TSAN=1 test-rdma-tsan` (the RDMA
# tests under ThreadSanitizer, one VM boot; a race report fails the binary).
test-rdma-tsan: $(RDMA_TESTS) tools
	$(RDMA_TSAN_WATCHDOG) tools/run-rdma-tests --out $(BUILD)/rdma-tests $(RDMA_TESTS)

# The RDMA tests that make sense on iWARP, on Soft-iWARP alone (siw0: rdma_cm and the cursor
# dialect), in one VM boot: `make test-rdma-siw` (local, not in CI: about 3 minutes). Left out,
# and why: docs/rdma-transport.md, "What runs on iWARP". The binaries not listed bring their own
# QPs up by hand or test immediate data, elastic pieces or zero-copy ring slices; RDMA_SIW_SKIP
# names the cases of listed binaries that do. The loop watchdog only reports there: siw transmits
# a user QP's send in the poster's own write() (siw_post_send runs the send queue in the syscall),
# so a loop posting 256 KiB spends that TCP copy as its system time (350-450 ms under TCG on a
# loaded host) where rxe only rings a doorbell.
RDMA_SIW_TESTS := $(addprefix $(BUILD)/test/rdma/,app_allocator_test builtin_rdma_test callctl_rdma_test \
  cluster_rdma_test cm_rdma_test copy_counters_rdma_test device_test legacy_peer_rdma_test memlock_test \
  oom_rdma_test pool_test registered_cap_test remote_post_test remote_region_test rpc_rdma_test \
  shared_cq_rdma_test teardown_rdma_test zerocopy_forward_test)
RDMA_SIW_SKIP := BuiltinRdma.RdmaConnectionShowsQpnWindowAndCredits:CopyCounters.DefaultsCopyNoReceivedByte:$\
  CopyCounters.ElasticWithA1xRetiredCapReceivesPartOfTheMessageWithoutCopy:$\
  CopyCounters.RecvZeroCopyWithBigRingCopiesNoAttachmentByte:DeviceTest.OpensByNameAndReportsThePort:$\
  DeviceTest.PicksTheIPv4MappedRoCEv2GidOfTheLocalAddress:DeviceTest.QpEventsReachTheWatcherOfThatQpOnly:$\
  RdmaOutOfMemory.OwnRingSliceDroppedUnderItsOwnLockDoesNotSelfDeadlock:$\
  RdmaZeroCopy.RingModeWaitsForHeldSlicesAndSaysSo
test-rdma-siw: $(RDMA_SIW_TESTS) tools
	$(RDMA_TSAN_WATCHDOG) GTEST_FILTER='-$(RDMA_SIW_SKIP)' tools/run-rdma-tests --siw --out $(BUILD)/rdma-tests-siw \
	  $(RDMA_SIW_TESTS)

# The kernel SMC-R suite: kernel AF_SMC peers in two Soft-RoCE guests with the patched
# rdma_rxe (docs/kernel-smc.md). Local, not in `make test`: it boots two VMs.
KSMC_BINS := $(BUILD)/test/kernel-smc/smc_pingpong $(BUILD)/tools/smc_nl $(BUILD)/test/kernel-smc/rrpc_clc_client $(BUILD)/test/kernel-smc/rrpc_smc_client $(BUILD)/test/kernel-smc/rrpc_smc_server
KSMC_CLC_OBJS := $(patsubst %,$(BUILD)/obj/%.o,transport/smc/clc.c transport/smc/clc_v2.c transport/smc/smc_config.c src/rrpc/core/errors.c)
$(BUILD)/test/kernel-smc/rrpc_clc_client: $(BUILD)/obj/test/kernel-smc/rrpc_clc_client.c.o $(KSMC_CLC_OBJS) $(BUILD)/librrpc_preload_policy.a
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $^ $(PRELOAD_POLICY_LDLIBS) -lpthread
# The two programs are users of the public rrpc/smc_stream.h, built into librrpc with RDMA.
$(BUILD)/test/kernel-smc/rrpc_smc_client $(BUILD)/test/kernel-smc/rrpc_smc_server: $(BUILD)/test/kernel-smc/%: $(BUILD)/obj/test/kernel-smc/%.c.o $(LIBRRPC) $(BUILD)/librrpc_preload_policy.a
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $^ $(PRELOAD_POLICY_LDLIBS) $(LDLIBS)
$(BUILD)/test/kernel-smc/smc_pingpong: test/kernel-smc/smc_pingpong.c
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(filter-out -MMD -MP,$(CFLAGS)) $(LDFLAGS) -o $@ $<
.PHONY: test-kernel-smc
test-kernel-smc: $(KSMC_BINS)
	test/kernel-smc/run.sh

# ---- fuzzing (clang + libFuzzer) -------------------------------------------
FUZZ_CC ?= clang
FUZZ_FLAGS := -std=c11 -g -O1 -fsanitize=fuzzer-no-link,address,undefined -D_GNU_SOURCE -Isrc -I.
# The fuzzers link without verbs: the no-RDMA variants of the RDMA-only parts.
FUZZ_CORE_SRCS := $(filter-out transport/rdma/% transport/smc/stream/%,$(CORE_SRCS)) \
    $(wildcard transport/rdma/wire/*.c) $(wildcard transport/rdma/none/*.c) $(wildcard transport/smc/stream/none/*.c)
FUZZ_OBJS := $(patsubst %,build/fuzz/obj/%.o,$(sort $(FUZZ_CORE_SRCS)))
FUZZERS := $(patsubst test/fuzz/%.c,build/fuzz/%,$(wildcard test/fuzz/*_fuzzer.c))
fuzz: $(FUZZERS)
# Keep the fuzz objects: they are shared by every target.
.SECONDARY: $(FUZZ_OBJS)
# -MMD: a header's change rebuilds the objects that include it (an inline
# that moved into a header otherwise leaves a stale object without it).
build/fuzz/obj/%.c.o: %.c
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_FLAGS) -MMD -MP -c $< -o $@
build/fuzz/%: test/fuzz/%.c $(FUZZ_OBJS)
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_FLAGS) -fsanitize=fuzzer -o $@ $^ -lpthread

clean:
	rm -rf build

-include $(shell find $(BUILD)/obj build/fuzz/obj -name '*.d' 2>/dev/null)
