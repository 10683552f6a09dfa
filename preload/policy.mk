# preload/policy.mk - included by the Makefile: rrpc-run's selection policy
# and SMC option negotiation (preload/policy.c, preload/bpf/), as one static
# library that librrpc_preload.so links, its unit test and its fuzzer.
#
# A program linking the library links $(PRELOAD_POLICY_LIB) after its own
# objects, then $(PRELOAD_POLICY_LDLIBS).
PRELOAD_POLICY_SRCS := preload/policy.c preload/bpf/smc_opt.c
PRELOAD_POLICY_LIB := $(BUILD)/librrpc_preload_policy.a
PRELOAD_POLICY_LDLIBS :=

# The eBPF part needs clang (-target bpf), bpftool (the skeleton) and
# libbpf-dev (tools/install-deps installs them). Without them smc_opt.c
# builds its -ENOSYS half and rrpc-run negotiates in peers mode only.
BPF_CLANG ?= clang
BPFTOOL ?= $(firstword $(shell command -v bpftool 2>/dev/null) $(wildcard /usr/sbin/bpftool /sbin/bpftool))
HAVE_EBPF := $(if $(and $(shell command -v $(BPF_CLANG) 2>/dev/null),$(BPFTOOL),$(wildcard /usr/include/bpf/libbpf.h)),1,)
SMC_OPT_SKEL := $(BUILD)/gen/preload/bpf/smc_opt.skel.h
SMC_OPT_BPF_OBJ := $(BUILD)/bpf/smc_opt.bpf.o

ifeq ($(HAVE_EBPF),1)
PRELOAD_POLICY_LDLIBS := -lbpf
$(BUILD)/obj/preload/bpf/smc_opt.c.o: CPPFLAGS += -DRRPC_HAVE_LIBBPF=1
$(BUILD)/obj/preload/bpf/smc_opt.c.o: $(SMC_OPT_SKEL)
# asm/types.h lives under the multiarch include directory.
$(SMC_OPT_BPF_OBJ): preload/bpf/smc_opt.bpf.c preload/bpf/smc_opt_state.h
	@mkdir -p $(@D)
	$(BPF_CLANG) -g -O2 -target bpf -Wall -Werror -I. -I/usr/include/$(shell $(CC) -print-multiarch) \
	  -c $< -o $@
$(SMC_OPT_SKEL): $(SMC_OPT_BPF_OBJ)
	@mkdir -p $(@D)
	$(BPFTOOL) gen skeleton $< name rrpc_smcopt_bpf > $@.tmp && mv $@.tmp $@
EBPF_NOTE := true
else
EBPF_NOTE := echo "rrpc-run: eBPF negotiation not built (needs clang, bpftool, libbpf-dev: tools/install-deps); peers mode only"
endif

.PHONY: preload-policy
preload-policy: $(PRELOAD_POLICY_LIB) $(BUILD)/test/preload_policy_unittest

$(PRELOAD_POLICY_LIB): $(call obj,$(PRELOAD_POLICY_SRCS))
	@mkdir -p $(@D)
	@$(EBPF_NOTE)
	rm -f $@ && $(AR) rcs $@ $^

# The unit test needs no rrpc library, only the policy's own.
$(BUILD)/test/preload_policy_unittest: $(BUILD)/obj/test/preload_policy_unittest.cc.o $(PRELOAD_POLICY_LIB)
	@mkdir -p $(@D)
	$(CXX) $(LDFLAGS) -o $@ $^ -lgtest_main -lgtest $(PRELOAD_POLICY_LDLIBS) -lpthread

# The fuzzer gets the policy and the no-eBPF smc_opt (the fuzz flags do not
# define RRPC_HAVE_LIBBPF), so it never loads a program.
build/fuzz/preload_policy_fuzzer: build/fuzz/obj/preload/policy.c.o build/fuzz/obj/preload/bpf/smc_opt.c.o

# The sock_ops program end to end (root and cgroup v2: the VM's
# test/preload/policy_smcopt_vm.sh runs it; the host runs --unprivileged).
$(BUILD)/test/preload/policy_smcopt_test: test/preload/policy_smcopt_test.c $(PRELOAD_POLICY_LIB)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(filter-out -MMD -MP,$(CFLAGS)) $(LDFLAGS) -o $@ $^ $(PRELOAD_POLICY_LDLIBS) -lpthread
$(BUILD)/test/preload/hostile_clc: test/preload/hostile_clc.c $(PRELOAD_POLICY_LIB)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(filter-out -MMD -MP,$(CFLAGS)) $(LDFLAGS) -o $@ $^ $(PRELOAD_POLICY_LDLIBS) -lpthread

# The real-program table (tools/rrpc-run-programs; one VM boot, minutes, not
# in CI). The rrpc-run column needs the preload (`make preload`) where the
# tree has it; without it the column says "not built".
.PHONY: bench-rrpc-run
bench-rrpc-run:
	-@$(MAKE) --no-print-directory preload 2>/dev/null
	RRPC_BUILD=$(BUILD) tools/rrpc-run-programs

# The sock_ops program and the hostile peers in one Soft-RoCE VM boot (root
# and cgroup v2 there; about a minute).
.PHONY: test-preload-policy-vm
test-preload-policy-vm: $(BUILD)/test/preload/policy_smcopt_test $(BUILD)/test/preload/hostile_clc examples
	RRPC_BUILD=$(BUILD) tools/rxe-vm --timeout 600 -- sh -c \
	  'test/preload/policy_smcopt_vm.sh && test/preload/hostile_vm.sh'
