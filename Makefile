# silvic-ring: the core library (build/libsilvic_ring.a and .so), the
# command (build/silvic-ring) and the tests.  `make V=1` shows full
# commands; `make SAN=1` builds with AddressSanitizer and UBSan into
# build-san/.  `make install [PREFIX=/usr/local] [DESTDIR=]`, `make dist`.

VERSION := $(shell sed -n 's/^\#define SR_VERSION "\(.*\)"/\1/p' src/silvic_ring.h)
PREFIX ?= /usr/local
DESTDIR ?=
BINDIR ?= $(PREFIX)/bin
LIBDIR ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
MANDIR ?= $(PREFIX)/share/man
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
BASHCOMPDIR ?= $(PREFIX)/share/bash-completion/completions
CC ?= cc
PKG_CONFIG ?= pkg-config

ifeq ($(SAN),1)
B := build-san
SANFLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
OPT ?= -O1 -g
else
B := build
SANFLAGS :=
OPT ?= -O2 -g
endif

WARN := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wno-unused-parameter
ifeq ($(WERROR),1)
WARN += -Werror
endif
CFLAGS ?= $(OPT)
ALL_CFLAGS := -std=c11 -D_GNU_SOURCE $(WARN) $(SANFLAGS) $(CFLAGS) -MMD -MP -Isrc
ALL_LDFLAGS := $(SANFLAGS) $(LDFLAGS)

# Optional features, found with pkg-config once per make; HTTP=0 or
# CRYPTO=0 turns one off, HTTP=1 or CRYPTO=1 insists on it.
HTTP_PKGS := libcurl libmicrohttpd
CRYPTO_PKGS := libcrypto
have = $(shell $(PKG_CONFIG) --exists $(1) 2>/dev/null && echo 1 || echo 0)
ifeq ($(origin HTTP),undefined)
HTTP := $(call have,$(HTTP_PKGS))
else ifeq ($(HTTP)$(call have,$(HTTP_PKGS)),10)
$(error HTTP=1 needs $(HTTP_PKGS) (Debian: libcurl4-openssl-dev libmicrohttpd-dev; scripts/install-deps installs them))
endif
ifeq ($(origin CRYPTO),undefined)
CRYPTO := $(call have,$(CRYPTO_PKGS))
else ifeq ($(CRYPTO)$(call have,$(CRYPTO_PKGS)),10)
$(error CRYPTO=1 needs $(CRYPTO_PKGS) (Debian: libssl-dev; scripts/install-deps installs it))
endif
FEATURE_CFLAGS :=
FEATURE_LIBS :=
ifeq ($(HTTP),1)
FEATURE_CFLAGS += -DSR_HAVE_HTTP=1 $(shell $(PKG_CONFIG) --cflags $(HTTP_PKGS))
FEATURE_LIBS += $(shell $(PKG_CONFIG) --libs $(HTTP_PKGS))
endif
# The core is position-independent (it is also a shared library) and
# exports only what src/silvic_ring.h declares.
CORE_CFLAGS := -fPIC -fvisibility=hidden
CORE_LIBS :=
PC_REQUIRES_PRIVATE :=
ifeq ($(CRYPTO),1)
CRYPTO_CFLAGS := $(shell $(PKG_CONFIG) --cflags $(CRYPTO_PKGS))
CORE_CFLAGS += -DSR_HAVE_CRYPTO=1 $(CRYPTO_CFLAGS)
CORE_LIBS += $(shell $(PKG_CONFIG) --libs $(CRYPTO_PKGS))
FEATURE_CFLAGS += -DSR_HAVE_CRYPTO=1 $(CRYPTO_CFLAGS)
FEATURE_LIBS += $(CORE_LIBS)
PC_REQUIRES_PRIVATE := $(CRYPTO_PKGS)
endif

# The configuration stamp: what the objects were built with.  Rewritten
# only when it changes, and every object depends on it, so installing a
# library (or HTTP=0, CFLAGS=..., SAN=1) rebuilds what it changes.
CONFIG := $(B)/config.mk
CONFIG_TEXT := HTTP=$(HTTP)|CRYPTO=$(CRYPTO)|CC=$(CC)|CFLAGS=$(ALL_CFLAGS)|CORE_CFLAGS=$(CORE_CFLAGS)|FEATURE_CFLAGS=$(strip $(FEATURE_CFLAGS))|LDFLAGS=$(strip $(ALL_LDFLAGS))|CORE_LIBS=$(strip $(CORE_LIBS))|FEATURE_LIBS=$(strip $(FEATURE_LIBS))

# The git revision for --version: `git describe` in a git checkout (this
# directory its top), else the REVISION file `make dist` puts in a
# tarball, else none.  Its own stamp, so a commit relinks only --version.
GIT_TOP := $(shell git -C "$(CURDIR)" rev-parse --show-toplevel 2>/dev/null)
ifeq ($(GIT_TOP),$(CURDIR))
REVISION := $(shell git -C "$(CURDIR)" describe --always --dirty 2>/dev/null)
else
REVISION := $(shell cat REVISION 2>/dev/null)
endif
REVISION_STAMP := $(B)/revision

SO_MAJOR := $(word 1,$(subst ., ,$(VERSION)))
SO_MINOR := $(word 2,$(subst ., ,$(VERSION)))
SONAME := libsilvic_ring.so.$(SO_MAJOR)
SO_FILE := libsilvic_ring.so.$(SO_MAJOR).$(SO_MINOR)

CORE_SRC := $(wildcard src/*.c)
CLI_SRC := $(wildcard cli/*.c)
UNIT_SRC := $(wildcard tests/unit/test_*.c)

CORE_OBJ := $(CORE_SRC:%.c=$(B)/%.o)
CLI_OBJ := $(CLI_SRC:%.c=$(B)/%.o)
UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=$(B)/tests/%)

LIB := $(B)/libsilvic_ring.a
SO := $(B)/$(SO_FILE)
BIN := $(B)/silvic-ring
# The command's objects but main, for the C tests of cli/ modules.
CLI_LIB := $(B)/libsrcli.a

ifneq ($(V),1)
Q := @
quiet = @printf '  %-6s %s\n' $(1) $(2);
endif

.PHONY: all check unit deps demo install uninstall clean dist fuzz valgrind soak soak-quick FORCE
all: $(LIB) $(SO) $(BIN)

include fuzz/Makefile.inc

# Written only when the text differs (git's GIT-CFLAGS trick): make then
# sees a new stamp exactly when the configuration changed.
$(CONFIG): export SR_CONFIG_TEXT := $(CONFIG_TEXT)
$(CONFIG): FORCE
	$(Q)mkdir -p $(@D); \
	printf '# what $(B)/ was built with (the Makefile rewrites it when it changes)\n%s\n' \
	    "$$SR_CONFIG_TEXT" | tr '|' '\n' >$@.new; \
	if cmp -s $@.new $@; then rm -f $@.new; else mv $@.new $@; \
	    printf '  %-6s %s\n' CONFIG "$@: HTTP=$(HTTP) CRYPTO=$(CRYPTO)"; fi

$(REVISION_STAMP): FORCE
	$(Q)mkdir -p $(@D); echo '$(REVISION)' >$@.new; \
	if cmp -s $@.new $@; then rm -f $@.new; else mv $@.new $@; fi

# The reduce kernels are the one hot loop: vectorised at -O3 whatever OPT is.
$(B)/src/reduce.o: CORE_CFLAGS += -O3

$(B)/src/%.o: src/%.c $(CONFIG)
	$(call quiet,CC,$@)
	$(Q)mkdir -p $(@D) && $(CC) $(ALL_CFLAGS) $(CORE_CFLAGS) -c -o $@ $<

$(B)/cli/%.o: cli/%.c $(CONFIG)
	$(call quiet,CC,$@)
	$(Q)mkdir -p $(@D) && $(CC) $(ALL_CFLAGS) $(FEATURE_CFLAGS) -DSR_BUILD_HTTP=$(HTTP) -c -o $@ $<

$(B)/cli/version.o: $(REVISION_STAMP)
$(B)/cli/version.o: FEATURE_CFLAGS += -DSR_REVISION='"$(REVISION)"'

$(LIB): $(CORE_OBJ)
	$(call quiet,AR,$@)
	$(Q)rm -f $@ && ar rcs $@ $^

# The shared library: its soname changes with the major version; -z defs
# makes a symbol missing from CORE_LIBS a link error here, not a user's.
$(SO): $(CORE_OBJ)
	$(call quiet,LD,$@)
	$(Q)$(CC) -shared -Wl,-soname,$(SONAME) -Wl,-z,defs $(ALL_LDFLAGS) -o $@ $^ $(CORE_LIBS)
	$(Q)ln -sf $(SO_FILE) $(B)/$(SONAME) && ln -sf $(SONAME) $(B)/libsilvic_ring.so

$(BIN): $(CLI_OBJ) $(LIB)
	$(call quiet,LD,$@)
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $(CLI_OBJ) $(LIB) $(FEATURE_LIBS) -lm

$(CLI_LIB): $(filter-out $(B)/cli/main.o,$(CLI_OBJ))
	$(call quiet,AR,$@)
	$(Q)rm -f $@ && ar rcs $@ $^

$(B)/tests/%: tests/unit/%.c tests/unit/check.h $(LIB) $(CLI_LIB) $(CONFIG)
	$(call quiet,CC,$@)
	$(Q)mkdir -p $(@D) && $(CC) $(ALL_CFLAGS) $(FEATURE_CFLAGS) -Itests/unit -Icli -o $@ $< $(CLI_LIB) $(LIB) $(ALL_LDFLAGS) $(FEATURE_LIBS) -lm -lpthread

# The unit and multi-rank C tests, then the bats suites; the last line is
# "N passed, N failed".  The build runs in a second make, after
# install-deps, so that it finds the libraries just installed.
check: deps
	$(Q)$(MAKE) --no-print-directory all $(UNIT_BIN) $(FUZZ_REPLAY_BIN)
	$(Q)scripts/run-tests $(B)

# Installs missing test dependencies (as root), or says what to install.
deps:
	$(Q)scripts/install-deps

unit: $(UNIT_BIN) $(FUZZ_REPLAY_BIN)
	$(Q)scripts/run-tests --unit-only $(B)

# The long soak (about 2 minutes on 2 cores): 10,000 collectives on 4
# local ranks, every result exact, RSS and descriptors sampled.
soak: all
	$(Q)scripts/soak --build $(B)
soak-quick: all
	$(Q)scripts/soak --quick --build $(B)

# The C tests of the pure modules under valgrind (the multi-rank ones fork
# and time out on purpose; they run under the sanitizers instead).
VALGRIND_TESTS := test_wire test_reduce test_schedule test_engine test_script test_jobs test_bench \
    test_pairs test_pairs_out test_connect
valgrind: $(UNIT_BIN)
	$(Q)for t in $(VALGRIND_TESTS); do \
	    [ -x $(B)/tests/$$t ] || continue; \
	    echo "# valgrind $$t"; \
	    valgrind -q --error-exitcode=9 --leak-check=full --errors-for-leak-kinds=definite \
	        $(B)/tests/$$t >/dev/null || { echo "valgrind: $$t failed"; exit 1; }; \
	done; echo "valgrind: clean"

# The first command on a fresh machine: as root it installs the build's
# libraries first; otherwise it builds with what is there and says what
# is missing.  The build is a second make, which finds them.
demo:
	$(Q)scripts/install-deps --build || \
	    echo "make demo: going on with what is installed (see silvic-ring --version)" >&2
	$(Q)$(MAKE) --no-print-directory all
	$(Q)scripts/demo $(B)/silvic-ring

install: all
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBDIR) $(DESTDIR)$(INCLUDEDIR) \
	    $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(PKGCONFIGDIR) $(DESTDIR)$(BASHCOMPDIR)
	install -m 755 $(BIN) $(DESTDIR)$(BINDIR)/silvic-ring
	install -m 644 $(LIB) $(DESTDIR)$(LIBDIR)/
	install -m 755 $(SO) $(DESTDIR)$(LIBDIR)/
	ln -sf $(SO_FILE) $(DESTDIR)$(LIBDIR)/$(SONAME)
	ln -sf $(SONAME) $(DESTDIR)$(LIBDIR)/libsilvic_ring.so
	install -m 644 src/silvic_ring.h $(DESTDIR)$(INCLUDEDIR)/
	install -m 644 man/silvic-ring.1 $(DESTDIR)$(MANDIR)/man1/
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@LIBDIR@|$(LIBDIR)|' \
	    -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|' -e 's|@VERSION@|$(VERSION)|' \
	    -e 's|@REQUIRES_PRIVATE@|$(PC_REQUIRES_PRIVATE)|' \
	    silvic-ring.pc.in >$(DESTDIR)$(PKGCONFIGDIR)/silvic-ring.pc
	chmod 644 $(DESTDIR)$(PKGCONFIGDIR)/silvic-ring.pc
	install -m 644 completions/silvic-ring.bash $(DESTDIR)$(BASHCOMPDIR)/silvic-ring

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/silvic-ring $(DESTDIR)$(LIBDIR)/libsilvic_ring.a \
	    $(DESTDIR)$(LIBDIR)/$(SO_FILE) $(DESTDIR)$(LIBDIR)/$(SONAME) \
	    $(DESTDIR)$(LIBDIR)/libsilvic_ring.so $(DESTDIR)$(INCLUDEDIR)/silvic_ring.h \
	    $(DESTDIR)$(MANDIR)/man1/silvic-ring.1 $(DESTDIR)$(PKGCONFIGDIR)/silvic-ring.pc \
	    $(DESTDIR)$(BASHCOMPDIR)/silvic-ring

# The release tarball $(DIST_DIR)/silvic-ring-$(VERSION).tar.gz: every
# file git tracks (or, in a tarball, its MANIFEST), with REVISION.
DIST_DIR ?= $(B)
dist:
	$(Q)scripts/dist $(DIST_DIR) $(VERSION)

clean:
	rm -rf build build-san build-fuzz

FORCE:

-include $(CORE_OBJ:.o=.d) $(CLI_OBJ:.o=.d) $(UNIT_BIN:=.d)
