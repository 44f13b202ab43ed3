# silvic-ring: the core library (build/libsilvic_ring.a), the command
# (build/silvic-ring) and the tests.  `make V=1` shows full commands;
# `make SAN=1` builds with AddressSanitizer and UBSan into build-san/.

VERSION := $(shell sed -n 's/^\#define SR_VERSION "\(.*\)"/\1/p' src/silvic_ring.h)
PREFIX ?= /usr/local
DESTDIR ?=
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

# Optional features, found with pkg-config; HTTP=0 or CRYPTO=0 turns one off.
HTTP ?= $(shell $(PKG_CONFIG) --exists libcurl libmicrohttpd 2>/dev/null && echo 1 || echo 0)
CRYPTO ?= $(shell $(PKG_CONFIG) --exists libcrypto 2>/dev/null && echo 1 || echo 0)
FEATURE_CFLAGS :=
FEATURE_LIBS :=
ifeq ($(HTTP),1)
FEATURE_CFLAGS += -DSR_HAVE_HTTP=1 $(shell $(PKG_CONFIG) --cflags libcurl libmicrohttpd)
FEATURE_LIBS += $(shell $(PKG_CONFIG) --libs libcurl libmicrohttpd)
endif
CORE_CFLAGS :=
ifeq ($(CRYPTO),1)
CORE_CFLAGS += -DSR_HAVE_CRYPTO=1 $(shell $(PKG_CONFIG) --cflags libcrypto)
FEATURE_CFLAGS += -DSR_HAVE_CRYPTO=1
FEATURE_LIBS += $(shell $(PKG_CONFIG) --libs libcrypto)
endif

CORE_SRC := $(wildcard src/*.c)
CLI_SRC := $(wildcard cli/*.c)
UNIT_SRC := $(wildcard tests/unit/test_*.c)

CORE_OBJ := $(CORE_SRC:%.c=$(B)/%.o)
CLI_OBJ := $(CLI_SRC:%.c=$(B)/%.o)
UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=$(B)/tests/%)

LIB := $(B)/libsilvic_ring.a
BIN := $(B)/silvic-ring
# The command's objects but main, for the C tests of cli/ modules.
CLI_LIB := $(B)/libsrcli.a

ifneq ($(V),1)
Q := @
quiet = @printf '  %-6s %s\n' $(1) $(2);
endif

.PHONY: all check unit deps demo install uninstall clean fuzz valgrind soak soak-quick
all: $(LIB) $(BIN)

include fuzz/Makefile.inc

# The reduce kernels are the one hot loop: vectorised at -O3 whatever OPT is.
$(B)/src/reduce.o: CORE_CFLAGS += -O3

$(B)/src/%.o: src/%.c
	$(call quiet,CC,$@)
	$(Q)mkdir -p $(@D) && $(CC) $(ALL_CFLAGS) $(CORE_CFLAGS) -c -o $@ $<

$(B)/cli/%.o: cli/%.c
	$(call quiet,CC,$@)
	$(Q)mkdir -p $(@D) && $(CC) $(ALL_CFLAGS) $(FEATURE_CFLAGS) -DSR_BUILD_HTTP=$(HTTP) -c -o $@ $<

$(LIB): $(CORE_OBJ)
	$(call quiet,AR,$@)
	$(Q)rm -f $@ && ar rcs $@ $^

$(BIN): $(CLI_OBJ) $(LIB)
	$(call quiet,LD,$@)
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $(CLI_OBJ) $(LIB) $(FEATURE_LIBS) -lm

$(CLI_LIB): $(filter-out $(B)/cli/main.o,$(CLI_OBJ))
	$(call quiet,AR,$@)
	$(Q)rm -f $@ && ar rcs $@ $^

$(B)/tests/%: tests/unit/%.c tests/unit/check.h $(LIB) $(CLI_LIB)
	$(call quiet,CC,$@)
	$(Q)mkdir -p $(@D) && $(CC) $(ALL_CFLAGS) $(FEATURE_CFLAGS) -Itests/unit -Icli -o $@ $< $(CLI_LIB) $(LIB) $(ALL_LDFLAGS) $(FEATURE_LIBS) -lm -lpthread

# The unit and multi-rank C tests, then the bats suites; the last line is
# "N passed, N failed".
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
VALGRIND_TESTS := test_wire test_reduce test_schedule test_engine test_script test_jobs test_bench
valgrind: $(UNIT_BIN)
	$(Q)for t in $(VALGRIND_TESTS); do \
	    [ -x $(B)/tests/$$t ] || continue; \
	    echo "# valgrind $$t"; \
	    valgrind -q --error-exitcode=9 --leak-check=full --errors-for-leak-kinds=definite \
	        $(B)/tests/$$t >/dev/null || { echo "valgrind: $$t failed"; exit 1; }; \
	done; echo "valgrind: clean"

demo: all
	$(Q)scripts/demo $(B)/silvic-ring

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/share/man/man1
	install -m 755 $(BIN) $(DESTDIR)$(PREFIX)/bin/silvic-ring
	install -m 644 $(LIB) $(DESTDIR)$(PREFIX)/lib/
	install -m 644 src/silvic_ring.h $(DESTDIR)$(PREFIX)/include/
	install -m 644 man/silvic-ring.1 $(DESTDIR)$(PREFIX)/share/man/man1/

uninstall:
	rm -f $(DESTDIR)$(PREFIX)/bin/silvic-ring $(DESTDIR)$(PREFIX)/lib/libsilvic_ring.a \
	    $(DESTDIR)$(PREFIX)/include/silvic_ring.h $(DESTDIR)$(PREFIX)/share/man/man1/silvic-ring.1

clean:
	rm -rf build build-san build-fuzz

-include $(CORE_OBJ:.o=.d) $(CLI_OBJ:.o=.d) $(UNIT_BIN:=.d)
