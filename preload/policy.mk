# preload/policy.mk - included by the Makefile: rrpc-run's selection policy
# and SMC option negotiation (preload/policy.c, preload/bpf/), as one static
# library that librrpc_preload.so links, its unit test and its fuzzer.
#
# A program linking the library links $(PRELOAD_POLICY_LIB) after its own
# objects, then $(PRELOAD_POLICY_LDLIBS).
PRELOAD_POLICY_SRCS := preload/policy.c $(wildcard preload/bpf/*.c)
PRELOAD_POLICY_LIB := $(BUILD)/librrpc_preload_policy.a
PRELOAD_POLICY_LDLIBS :=

.PHONY: preload-policy
preload-policy: $(PRELOAD_POLICY_LIB) $(BUILD)/test/preload_policy_unittest

$(PRELOAD_POLICY_LIB): $(call obj,$(PRELOAD_POLICY_SRCS))
	@mkdir -p $(@D)
	rm -f $@ && $(AR) rcs $@ $^

# The unit test needs no rrpc library, only the policy's own.
$(BUILD)/test/preload_policy_unittest: $(BUILD)/obj/test/preload_policy_unittest.cc.o $(PRELOAD_POLICY_LIB)
	@mkdir -p $(@D)
	$(CXX) $(LDFLAGS) -o $@ $^ -lgtest_main -lgtest $(PRELOAD_POLICY_LDLIBS) -lpthread

# The fuzzer gets the policy and the no-eBPF smc_opt (the fuzz flags do not
# define RRPC_HAVE_LIBBPF), so it never loads a program.
build/fuzz/preload_policy_fuzzer: build/fuzz/obj/preload/policy.c.o build/fuzz/obj/preload/bpf/smc_opt.c.o
