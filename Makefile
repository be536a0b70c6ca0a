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

# The CUDA kernels do not change with the sanitizers: one build of them
# serves `make check` and `make SAN=1 check`.
CUDA_DIR := $(BUILD)/cuda

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

.PHONY: all check test-bins demo fuzz bench clean deps cuda cuda-emu gpu-tools FORCE
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

# The fake CUDA driver (tests/fakes/libcuda.c) that the tests of the CUDA
# loader open through NF_LIBCUDA; built without sanitizers, as a real driver is.
FAKE_LIBCUDA := $(BUILD)/tests/fakes/libcuda.so.1
$(FAKE_LIBCUDA): tests/fakes/libcuda.c tests/fakes/fake_log.h
	@mkdir -p $(@D)
	$(CC) -std=c11 -g -O1 -Wall -Wextra -Werror -fPIC -shared -o $@ $<
$(BUILD)/tests/engine/test_cuda_driver $(BUILD)/tests/engine/test_cubin $(BUILD)/tests/serve/test_gpu \
	$(BUILD)/tests/engine/test_cuda_backend $(BUILD)/tests/engine/test_timing_cache \
	$(BUILD)/tests/factory/test_gpu_profile_tune: | $(FAKE_LIBCUDA)
test-bins: $(FAKE_LIBCUDA)
# The fake cuBLASLt (tests/fakes/libcublasLt.c) the tactics' tests open
# through NF_LIBCUBLASLT: the call sequence of a candidate, no product.
FAKE_LIBCUBLASLT := $(BUILD)/tests/fakes/libcublasLt.so.13
$(FAKE_LIBCUBLASLT): tests/fakes/libcublasLt.c tests/fakes/fake_log.h
	@mkdir -p $(@D)
	$(CC) -std=c11 -g -O1 -Wall -Wextra -Werror -fPIC -shared -o $@ $<
$(BUILD)/tests/engine/test_cuda_cublaslt: | $(FAKE_LIBCUDA) $(FAKE_LIBCUBLASLT)
test-bins: $(FAKE_LIBCUBLASLT)

# CUDA kernels (engine/cuda/*.cu), apart from `all` since nvcc is slow: the
# .cu files as one translation unit per architecture (each compiled once;
# `make -j2` runs the architectures side by side) into one cubin holding
# every kernel (cuModuleLoadData takes one), with ptxas's resource report
# kept beside it for the static checks (tests/e2e/cuda_static.sh), and the
# PTX of the lowest architecture for GPUs newer than every cubin.  The
# architectures are those of engine/sku.c's device table (sm_90a and sm_100a
# are the arch-specific targets of its sm_90 and sm_100 SKUs) and sm_120;
# each needs its per-SM limits there (nf_sku_arch_of).
CUDA_ARCHS := sm_75 sm_80 sm_86 sm_89 sm_90a sm_100a sm_120
CUDA_PTX_ARCH := compute_75
NVCC ?= nvcc
NVCC_FLAGS := -std=c++17 -O3 -I. --Werror all-warnings
HAVE_NVCC := $(shell command -v $(NVCC) 2>/dev/null)
CUDA_SRCS := $(sort $(wildcard engine/cuda/*.cu))
CUDA_HDRS := $(wildcard engine/cuda/*.cuh engine/cuda/*.h engine/kmath/*.h)
CUDA_UNIT := $(CUDA_DIR)/nf_kernels.cu
CUDA_CUBINS := $(foreach a,$(CUDA_ARCHS),$(CUDA_DIR)/$(a)/nf_kernels.cubin)
CUDA_PTX := $(CUDA_DIR)/$(CUDA_PTX_ARCH)/nf_kernels.ptx
# Every cubin and the PTX in one fat binary (cuModuleLoadData picks the
# device's own; `cuobjdump --list-elf` lists them).
CUDA_FATBIN := $(CUDA_DIR)/nf_kernels.fatbin
FATBINARY = $(dir $(HAVE_NVCC))fatbinary

ifneq ($(HAVE_NVCC),)
cuda: $(CUDA_CUBINS) $(CUDA_PTX) $(CUDA_FATBIN)
else
cuda:
	@echo "nvcc not found: building the CPU tools alone (no CUDA kernels)"
endif

# Rewritten only when the list of .cu files changes (a file added or gone).
$(CUDA_UNIT): $(CUDA_SRCS) FORCE
	@mkdir -p $(@D)
	@printf '#include "%s"\n' $(CUDA_SRCS) > $@.tmp
	@cmp -s $@.tmp $@ && rm -f $@.tmp || mv -f $@.tmp $@

FORCE:

$(CUDA_DIR)/sm_%/nf_kernels.cubin: $(CUDA_UNIT) $(CUDA_HDRS)
	@mkdir -p $(@D)
	$(NVCC) $(NVCC_FLAGS) -arch=sm_$* -cubin -Xptxas -v $< -o $@ 2> $(@D)/ptxas.log || \
		{ cat $(@D)/ptxas.log; rm -f $@; exit 1; }

$(CUDA_PTX): $(CUDA_UNIT) $(CUDA_HDRS)
	@mkdir -p $(@D)
	$(NVCC) $(NVCC_FLAGS) -arch=$(CUDA_PTX_ARCH) -ptx $< -o $@

# The kernels run on the CPU through a model of CUDA's blocks and warps
# (tests/cuda_emu/emu.h), against the CPU engine: their thread decomposition
# checked where no GPU is (no nvcc needed).  Opt-in, not in `check`: it
# starts a thread per CUDA thread (seconds).
CXX ?= g++
CUDA_EMU := $(BUILD)/tests/cuda_emu/test_cuda_emu
$(CUDA_EMU): tests/cuda_emu/test_cuda_emu.cpp tests/cuda_emu/emu.h $(CUDA_UNIT) $(CUDA_HDRS) \
		$(call libs_for,engine)
	@mkdir -p $(@D)
	$(CXX) -std=c++20 -O1 -g -pthread -I. -Wall -Wextra -Werror -Wno-unused-parameter \
		$(SANFLAGS) -include tests/cuda_emu/emu.h $< -o $@ $(call libs_for,engine) $(LIBS)

cuda-emu: $(CUDA_EMU)
	$(CUDA_EMU)

$(CUDA_FATBIN): $(CUDA_CUBINS) $(CUDA_PTX)
	$(FATBINARY) -64 --create=$@ \
		$(foreach a,$(CUDA_ARCHS),--image3=kind=elf,sm=$(a:sm_%=%),file=$(CUDA_DIR)/$(a)/nf_kernels.cubin) \
		--image3=kind=ptx,sm=$(CUDA_PTX_ARCH:compute_%=%),file=$(CUDA_PTX)

# The checks that need a GPU (tests/gpu/run.sh, docs/cuda.md): their
# programs, built here but run only on a machine with one.
GPU_TOOLS := $(patsubst tests/gpu/%.c,$(BUILD)/tests/gpu/%,$(wildcard tests/gpu/*.c))
$(BUILD)/tests/gpu/%: $(BUILD)/obj/tests/gpu/%.o $(call libs_for,engine)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS_ALL) -o $@ $< $(call libs_for,engine) $(LIBS)
gpu-tools: $(GPU_TOOLS)
test-bins: $(GPU_TOOLS)

# Tests find the binaries, the shared models and the repository through these.
TEST_ENV := NF_BUILD=$(abspath $(BUILD)) NF_SHARED=$(SHARED) NF_SRC=$(CURDIR) NF_SAN=$(SAN) \
	NF_CUDA=$(abspath $(CUDA_DIR))

check: test-bins cuda
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
