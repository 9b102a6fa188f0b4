# moonkv build. `make` builds everything, `make test` runs every suite twice
# (plain and under ASan+UBSan), `make run` starts standalone in the foreground.

CC      ?= cc
SAN     ?= 0
PREFIX  ?= /usr/local
VERSION := 0.1.0

ifeq ($(SAN),1)
BUILD    := build/san
OPTFLAGS := -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer \
            -fno-sanitize-recover=undefined
else
BUILD    := build/rel
OPTFLAGS := -O2 -g
endif

WARN     := -Wall -Wextra -Werror -Wno-unused-parameter
CPPFLAGS += -D_GNU_SOURCE -DMOONKV_VERSION=\"$(VERSION)\" -I. -Isrc
CFLAGS   += -std=gnu11 -fPIC -pthread $(WARN) $(OPTFLAGS) -MMD -MP
LDFLAGS  += -pthread $(if $(filter 1,$(SAN)),-fsanitize=address$(,)undefined)
LDLIBS   := -lev -lhiredis -lcjson -libverbs -lrdmacm -lm
,        := ,

# Every module directory feeds one internal archive; binaries link it.
MOD_SRCS := $(wildcard resp/*.c src/core/*.c src/server/*.c src/master/*.c \
              src/node/*.c src/gateway/*.c backend/*.c rdma/*.c src/client/*.c)
MOD_SRCS := $(filter-out src/server/main.c,$(MOD_SRCS))
MOD_OBJS := $(MOD_SRCS:%.c=$(BUILD)/%.o)
CLI_SRCS := $(wildcard src/client/*.c resp/*.c src/core/*.c backend/*.c rdma/*.c)
CLI_OBJS := $(CLI_SRCS:%.c=$(BUILD)/%.o)
SUP_SRCS := $(wildcard tests/support/*.c)
SUP_OBJS := $(SUP_SRCS:%.c=$(BUILD)/%.o)
UNIT_SRCS := $(wildcard tests/unit/test_*.c)
INTG_SRCS := $(wildcard tests/integration/test_*.c)
BENCH_SRCS := $(wildcard tests/bench/*.c)
TEST_BINS := $(UNIT_SRCS:%.c=$(BUILD)/%) $(INTG_SRCS:%.c=$(BUILD)/%)
BENCH_BINS := $(BENCH_SRCS:%.c=$(BUILD)/%)

SERVER  := $(BUILD)/moonkv-server
LIBA    := $(BUILD)/libmoonkv.a
LIBSO   := $(BUILD)/libmoonkv.so
INTERNAL := $(BUILD)/libmoonkv-internal.a

.PHONY: all tests run test deps clean install bench
all: $(SERVER) $(LIBA) $(LIBSO) tests

tests: $(TEST_BINS) $(BENCH_BINS)

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -c $< -o $@

$(INTERNAL): $(MOD_OBJS)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(LIBA): $(CLI_OBJS)
	rm -f $@ && ar rcs $@ $^

$(LIBSO): $(CLI_OBJS)
	$(CC) -shared -Wl,-soname,libmoonkv.so.0 $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(SERVER): $(BUILD)/src/server/main.o $(INTERNAL)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/tests/%: tests/%.c $(INTERNAL) $(SUP_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -Itests -o $@ $< $(SUP_OBJS) $(INTERNAL) $(LDFLAGS) $(LDLIBS)

deps:
	@scripts/deps.sh

run: deps
	@$(MAKE) --no-print-directory $(SERVER)
	$(SERVER) --config conf/standalone.json

# Plain run first, then the same suites under ASan+UBSan; run.sh prints
# the final "N passed, N failed" line and fails on any failure.
test: deps
	@$(MAKE) --no-print-directory all
	@$(MAKE) --no-print-directory SAN=1 all
	@tests/run.sh build/rel build/san

bench: deps
	@$(MAKE) --no-print-directory all
	@tests/bench/run.sh build/rel

install: $(SERVER) $(LIBA) $(LIBSO)
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/lib/pkgconfig
	install -m 755 $(SERVER) $(DESTDIR)$(PREFIX)/bin/
	install -m 644 $(LIBA) $(DESTDIR)$(PREFIX)/lib/
	install -m 755 $(LIBSO) $(DESTDIR)$(PREFIX)/lib/libmoonkv.so.0
	ln -sf libmoonkv.so.0 $(DESTDIR)$(PREFIX)/lib/libmoonkv.so
	install -m 644 src/client/moonkv.h $(DESTDIR)$(PREFIX)/include/
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(VERSION)|' src/client/moonkv.pc.in \
	    > $(DESTDIR)$(PREFIX)/lib/pkgconfig/moonkv.pc

clean:
	rm -rf build

-include $(shell find build -name '*.d' 2>/dev/null)
