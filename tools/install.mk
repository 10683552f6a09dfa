# tools/install.mk - included by the Makefile: `make install PREFIX=... [DESTDIR=...]`.
#
# Installs the public headers (include/rrpc, include/rrpc/cxx), the static
# and shared libraries (lib/, soname lib<name>.so.MAJOR), pkg-config files
# (lib/pkgconfig/rrpc.pc, rrpc-cxx.pc, rrpc-cxx-with-brpc.pc,
# rrpc-brpc-compat.pc) and a CMake package (lib/cmake/rrpc:
# find_package(rrpc)). Templates: tools/pkg/. The brpc-named headers
# (brpc/server.h, butil/endpoint.h, ...) go to include/rrpc/compat, a
# directory only rrpc-brpc-compat puts on the include path.
PREFIX ?= /usr/local
LIBDIR ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include

# Public headers: the C API and the C++ face; transport.h (for transports)
# and the files that say they are private are left out.
PUBLIC_HDRS := $(filter-out src/rrpc/transport.h,$(wildcard src/rrpc/*.h))
PUBLIC_CXX_HDRS := $(filter-out src/rrpc/cxx/detail.h src/rrpc/cxx/flag_value.h \
                     src/rrpc/cxx/flag_validators.h,\
                     $(wildcard src/rrpc/cxx/*.h))
COMPAT_DIRS := brpc butil json2pb
# Libraries a static link of the C core needs beyond librrpc.a.
PKG_CORE_PRIVATE := $(if $(filter 1,$(WITH_RDMA)),-lrdmacm -libverbs) -lpthread

# pkg_subst TEMPLATE OUT: fill in a template from tools/pkg.
pkg_subst = sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@LIBDIR@|$(LIBDIR)|g' \
  -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|g' -e 's|@VERSION@|$(VERSION)|g' \
  -e 's|@SOMAJOR@|$(SOMAJOR)|g' -e 's|@CORE_PRIVATE@|$(PKG_CORE_PRIVATE)|g' $(1) > $(2)

install: libs
	install -d $(DESTDIR)$(INCLUDEDIR)/rrpc/cxx $(DESTDIR)$(LIBDIR)/pkgconfig \
	  $(DESTDIR)$(LIBDIR)/cmake/rrpc
	install -m 644 $(PUBLIC_HDRS) $(DESTDIR)$(INCLUDEDIR)/rrpc/
	install -m 644 $(PUBLIC_CXX_HDRS) $(DESTDIR)$(INCLUDEDIR)/rrpc/cxx/
	for d in $(COMPAT_DIRS); do \
	  install -d $(DESTDIR)$(INCLUDEDIR)/rrpc/compat/$$d && \
	  install -m 644 src/rrpc/cxx/compat/$$d/*.h $(DESTDIR)$(INCLUDEDIR)/rrpc/compat/$$d/ || exit 1; \
	done
	install -m 644 $(LIBRRPC) $(LIBRRPC_CXX) $(LIBRRPC_FLAGS) $(DESTDIR)$(LIBDIR)/
	for so in $(notdir $(SHARED_LIBS)); do \
	  install -m 755 $(BUILD)/$$so.$(VERSION) $(DESTDIR)$(LIBDIR)/ && \
	  ln -sf $$so.$(VERSION) $(DESTDIR)$(LIBDIR)/$$so.$(SOMAJOR) && \
	  ln -sf $$so.$(SOMAJOR) $(DESTDIR)$(LIBDIR)/$$so || exit 1; \
	done
	for pc in rrpc rrpc-cxx rrpc-cxx-with-brpc rrpc-brpc-compat; do \
	  $(call pkg_subst,tools/pkg/$$pc.pc.in,$(DESTDIR)$(LIBDIR)/pkgconfig/$$pc.pc) || exit 1; \
	done
	$(call pkg_subst,tools/pkg/rrpcConfig.cmake.in,$(DESTDIR)$(LIBDIR)/cmake/rrpc/rrpcConfig.cmake)
	$(call pkg_subst,tools/pkg/rrpcConfigVersion.cmake.in,$(DESTDIR)$(LIBDIR)/cmake/rrpc/rrpcConfigVersion.cmake)
	@echo "installed rrpc $(VERSION) under $(DESTDIR)$(PREFIX)"
