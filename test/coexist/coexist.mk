# test/coexist/coexist.mk - included by the Makefile: the flag-coexistence
# test, linked the two ways a process gets brpc: statically and as shared
# libraries. fake_brpc.cc stands in for brpc (it defines the flags brpc
# defines, with brpc's types); librrpc_flags is left out, as a program that
# links brpc must leave it out.
COEXIST_DIR := $(BUILD)/test/coexist
COEXIST_MAIN := $(call obj,test/coexist/flags_coexist_test.cc $(call pbcc,test/cxx_echo.proto))
COEXIST_FAKE := $(call obj,test/coexist/fake_brpc.cc)
COEXIST_TESTS := $(COEXIST_DIR)/flags_static_test $(COEXIST_DIR)/flags_shared_test
tests: $(COEXIST_TESTS)

$(COEXIST_DIR)/flags_static_test: $(COEXIST_MAIN) $(COEXIST_FAKE) $(LIBRRPC_CXX) $(LIBRRPC)
	@mkdir -p $(@D)
	$(CXX) $(LDFLAGS) -o $@ $^ $(GTEST_LIBS) $(CXXLIBS) $(LDLIBS)
$(COEXIST_DIR)/libfake_brpc.so: $(COEXIST_FAKE)
	@mkdir -p $(@D)
	$(CXX) -shared $(LDFLAGS) -o $@ $^ -lgflags
$(COEXIST_DIR)/flags_shared_test: $(COEXIST_MAIN) $(COEXIST_DIR)/libfake_brpc.so \
    $(BUILD)/librrpc_cxx.so $(BUILD)/librrpc.so
	$(CXX) $(LDFLAGS) -o $@ $(COEXIST_MAIN) \
	  -Wl,-rpath,$(abspath $(COEXIST_DIR)):$(abspath $(BUILD)) \
	  -L$(COEXIST_DIR) -lfake_brpc -L$(BUILD) -lrrpc_cxx -lrrpc \
	  $(GTEST_LIBS) $(CXXLIBS) $(LDLIBS)
