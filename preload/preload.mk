# preload/preload.mk - included by the Makefile: rrpc-run's
# librrpc_preload.so (the preload and the whole C core, linked in so a
# program needs nothing else installed), its tests, its install.
#
# The selection policy and the SMC option (preload/policy.mk) come as one
# static library, linked after the preload's own objects.
PRELOAD_SRCS := preload/env_num.c preload/erm.c preload/erm_epoll.c preload/erm_parse.c preload/frame.c preload/intercept.c preload/relay.c preload/stat_page.c \
    preload/stat_route.c
PRELOAD_LIB := $(BUILD)/librrpc_preload.so
PRELOAD_TESTS := $(BUILD)/test/preload/preload_semantics $(BUILD)/test/preload/erm_copy $(BUILD)/test/preload/erm_wait

# make test runs the socket-semantics script in every build (plain, SAN=1,
# TSAN=1: the test program and the preload are instrumented alike); make
# test-rdma runs it in the VM.
PRELOAD_TEST_SCRIPTS := test/preload/preload_test.sh test/preload/erm_test.sh
test: preload

.PHONY: preload install-preload
preload: $(PRELOAD_LIB) $(PRELOAD_TESTS)
libs: $(PRELOAD_LIB)

$(PRELOAD_LIB): $(call obj,$(PRELOAD_SRCS)) $(CORE_OBJS) $(PRELOAD_POLICY_LIB)
	@mkdir -p $(@D)
	$(CC) -shared $(LDFLAGS) -Wl,-soname,librrpc_preload.so -o $@ $(call obj,$(PRELOAD_SRCS)) $(CORE_OBJS) \
	  $(PRELOAD_POLICY_LIB) $(PRELOAD_POLICY_LDLIBS) $(LDLIBS) -ldl

# The test programs are plain C programs, no rrpc in them: rrpc-run is what
# puts it under them.
$(BUILD)/test/preload/%: test/preload/%.c test/preload/preload_test.h
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(filter-out -MMD -MP,$(CFLAGS)) $(LDFLAGS) -o $@ $< -lpthread
$(BUILD)/test/preload/erm_copy $(BUILD)/test/preload/erm_wait: test/preload/erm_prog.h

install: install-preload
install-preload: $(PRELOAD_LIB)
	install -d $(DESTDIR)$(LIBDIR) $(DESTDIR)$(PREFIX)/bin
	install -m 755 $(PRELOAD_LIB) $(DESTDIR)$(LIBDIR)/
	sed 's|^RRPC_RUN_LIBDIR=.*|RRPC_RUN_LIBDIR=$(LIBDIR)|' tools/rrpc-run > $(DESTDIR)$(PREFIX)/bin/rrpc-run
	chmod 755 $(DESTDIR)$(PREFIX)/bin/rrpc-run

# The relay's frame parser is fuzzed (make fuzz): its one object joins the fuzzer.
build/fuzz/preload_frame_fuzzer: build/fuzz/obj/preload/frame.c.o

# What else the preload parses from outside (the numeric RRPC_RUN_* settings,
# the stat port's request check): pure functions with their own unit test,
# which needs no rrpc library, and the preload_input fuzzer.
PRELOAD_INPUT_SRCS := preload/env_num.c preload/stat_route.c
$(BUILD)/test/preload_input_unittest: $(BUILD)/obj/test/preload_input_unittest.cc.o $(call obj,$(PRELOAD_INPUT_SRCS))
	@mkdir -p $(@D)
	$(CXX) $(LDFLAGS) -o $@ $^ -lgtest_main -lgtest -lpthread
build/fuzz/preload_input_fuzzer: $(patsubst %,build/fuzz/obj/%.o,$(PRELOAD_INPUT_SRCS))

# ERM's option and control-message parser (preload/erm_parse.h), fuzzed.
build/fuzz/preload_erm_fuzzer: build/fuzz/obj/preload/erm_parse.c.o

# The (epoll set, relayed socket) pairs ERM's completions wake
# (preload/erm_epoll.h), against a model of the kernel's epoll.
build/fuzz/preload_erm_epoll_fuzzer: build/fuzz/obj/preload/erm_epoll.c.o build/fuzz/obj/preload/env_num.c.o
