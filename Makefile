# nimfactory - top-level build.
#
#   make            build the tools into build/
#   make demo       install what is missing, build, and build recipes/llama.yaml
#   make check      run every test (TAP, through prove)
#   make SAN=1 check   the same with AddressSanitizer + UBSan (into build/san)
#   make fuzz       run the libFuzzer targets for a bounded time (clang)
#   make bench      benchmarks against their ceilings and peers (not run in CI)

.DEFAULT_GOAL := all
BUILD ?= build
CC ?= cc
SHARED ?= $(abspath ../shared)

PKGS := yaml-0.1 jansson libarchive libcurl libgit2 libcrypto libzstd zlib libmicrohttpd libdeflate libpcre2-8
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS := $(shell pkg-config --libs $(PKGS) 2>/dev/null)

OPT ?= -O2
CFLAGS_BASE := -std=c11 -D_POSIX_C_SOURCE=200809L -g $(OPT) -pthread \
	-Wall -Wextra -Werror -Wshadow -Wno-unused-parameter -Wvla \
	-fno-strict-aliasing -I. $(PKG_CFLAGS)

ifeq ($(SAN),1)
override BUILD := $(BUILD)/san
SANFLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
endif

CFLAGS_ALL := $(CFLAGS_BASE) $(SANFLAGS) $(EXTRA_CFLAGS) $(CFLAGS)
# Extra flags for the SIMD kernel families only (engine/cpu/): the fuzz
# build compiles them at -O0, since clang with ASan and UBSan spends many
# minutes on their unrolled loops at any optimization level.
KERNEL_CFLAGS ?=
LDFLAGS_ALL := -pthread $(SANFLAGS) $(EXTRA_LDFLAGS) $(LDFLAGS)
# libunistring has no pkg-config file: Unicode normalization for the tokenizers
LIBS := $(PKG_LIBS) -lunistring -lm -ldl

# Modules, lowest first: a module may use the ones before it (see docs/ARCHITECTURE.md).
MODULES := util engine images factory serve
src_of = $(shell find $(1) -name '*.c' 2>/dev/null | LC_ALL=C sort)
MODULE_LIBS := $(foreach m,$(MODULES),$(BUILD)/lib/libnf_$(m).a)
# Link order: highest module first.
LINK_LIBS := $(foreach m,serve factory images engine util,$(BUILD)/lib/libnf_$(m).a)

define module_rule
$(1)_OBJS := $$(patsubst %.c,$(BUILD)/obj/%.o,$$(call src_of,$(1)))
$(BUILD)/lib/libnf_$(1).a: $$($(1)_OBJS)
	@mkdir -p $$(@D)
	@rm -f $$@
	$$(AR) rcs $$@ $$^
endef
$(foreach m,$(MODULES),$(eval $(call module_rule,$(m))))

NIMFACTORY_OBJS := $(patsubst %.c,$(BUILD)/obj/%.o,$(call src_of,cmd/nimfactory))
NIMSERVE_OBJS := $(patsubst %.c,$(BUILD)/obj/%.o,$(call src_of,cmd/nimserve))
TOOL_SRCS := $(call src_of,tests/tools)
TOOL_BINS := $(patsubst tests/tools/%.c,$(BUILD)/tools/%,$(TOOL_SRCS))
TEST_SRCS := $(call src_of,tests/unit)
TEST_BINS := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(TEST_SRCS))

# What each module's unit tests link: the module and the ones it may use, so a
# module's tests build while another module is being worked on.
DEPS_util := util
DEPS_engine := engine util
DEPS_images := images util
DEPS_factory := factory images engine util
DEPS_serve := serve engine util
libs_for = $(foreach d,$(DEPS_$(1)),$(BUILD)/lib/libnf_$(d).a)
E2E_TESTS := $(sort $(wildcard tests/e2e/*.sh))

BINS := $(BUILD)/bin/nimfactory $(if $(NIMSERVE_OBJS),$(BUILD)/bin/nimserve)

.PHONY: all check test-bins demo fuzz bench clean deps
all: $(BINS) $(TOOL_BINS)

$(BUILD)/obj/engine/cpu/%.o: CFLAGS_ALL += $(KERNEL_CFLAGS)

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_ALL) -MMD -MP -c $< -o $@

$(BUILD)/bin/nimfactory: $(NIMFACTORY_OBJS) $(MODULE_LIBS)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS_ALL) -o $@ $(NIMFACTORY_OBJS) $(LINK_LIBS) $(LIBS)

$(BUILD)/bin/nimserve: $(NIMSERVE_OBJS) $(MODULE_LIBS)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS_ALL) -o $@ $(NIMSERVE_OBJS) $(LINK_LIBS) $(LIBS)

$(BUILD)/tools/%: $(BUILD)/obj/tests/tools/%.o $(MODULE_LIBS)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS_ALL) -o $@ $< $(LINK_LIBS) $(LIBS)

define test_rule
$(BUILD)/tests/$(1)/%: $(BUILD)/obj/tests/unit/$(1)/%.o $$(call libs_for,$(1))
	@mkdir -p $$(@D)
	$$(CC) $$(LDFLAGS_ALL) -o $$@ $$< $$(call libs_for,$(1)) $$(LIBS)
endef
$(foreach m,$(MODULES),$(eval $(call test_rule,$(m))))

test-bins: all $(TEST_BINS)

# Tests find the binaries, the shared models and the repository through these.
TEST_ENV := NF_BUILD=$(abspath $(BUILD)) NF_SHARED=$(SHARED) NF_SRC=$(CURDIR) NF_SAN=$(SAN)

check: test-bins
	$(TEST_ENV) prove -j2 --timer --exec '' $(TEST_BINS) $(E2E_TESTS)

demo:
	sh ci/install-deps.sh
	$(MAKE) all
	sh ci/demo.sh

deps:
	sh ci/install-deps.sh

fuzz:
	sh tests/fuzz/run.sh

bench:
	sh tests/bench/run.sh

clean:
	rm -rf build

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)

# Keep intermediate objects (tests and tools are built through pattern rules).
.SECONDARY:
