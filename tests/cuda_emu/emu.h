/*
 * emu.h - just enough of CUDA's execution model on the CPU to run the
 * kernels of engine/cuda/ without a GPU (tests/cuda_emu/test_cuda_emu.cpp):
 * a launch runs its blocks one after another, each block's threads as
 * std::threads; __syncthreads is a barrier of the block, a warp shuffle
 * goes through a slot per lane between two barriers of the warp; __shared__
 * is static storage (one block at a time).  nvcc's intrinsics the kernels
 * use outside engine/kmath (which takes its host branch here) are defined
 * below.  It checks the thread decomposition and indexing of the kernels
 * against the CPU engine, not the hardware: timing, memory ordering and
 * the device's own math library are a GPU run's to check.
 */
#ifndef NF_TESTS_CUDA_EMU_H
#define NF_TESTS_CUDA_EMU_H
#include <barrier>
#include <thread>
#include <vector>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <cstdint>
#include <cstddef>
struct dim3 { unsigned x = 1, y = 1, z = 1; };
inline thread_local dim3 threadIdx;
inline dim3 blockIdx, gridDim, blockDim;
#define __global__
#define __device__
#define __host__
#define __shared__ static
#define __forceinline__ inline
#define __launch_bounds__(x)
struct float4 { float x, y, z, w; };
struct uint4 { unsigned x, y, z, w; };
using std::min; using std::max;
inline std::barrier<> *emu_block_bar;
inline std::barrier<> *emu_warp_bar[32];
inline void __syncthreads() { emu_block_bar->arrive_and_wait(); }
inline uint64_t emu_slot[32][32];
template <class T> T __shfl_xor_sync(unsigned, T v, int o)
{
	int w = threadIdx.x / 32, l = threadIdx.x % 32;
	uint64_t u = 0; memcpy(&u, &v, sizeof v);
	emu_slot[w][l] = u;
	emu_warp_bar[w]->arrive_and_wait();
	uint64_t r = emu_slot[w][l ^ o];
	emu_warp_bar[w]->arrive_and_wait();
	T t; memcpy(&t, &r, sizeof t); return t;
}
/* Run kernel f over a gx x gy grid of blocks of bx threads. */
template <class F, class... A> void emu_launch(F f, unsigned gx, unsigned gy, unsigned bx, A... args)
{
	gridDim = {gx, gy, 1}; blockDim = {bx, 1, 1};
	for (unsigned by = 0; by < gy; by++)
		for (unsigned b = 0; b < gx; b++) {
			blockIdx = {b, by, 0};
			std::barrier<> bar(bx);
			std::vector<std::barrier<> *> wb;
			for (unsigned w = 0; w < (bx + 31) / 32; w++) wb.push_back(emu_warp_bar[w] = new std::barrier<>(std::min(32u, bx - 32 * w)));
			emu_block_bar = &bar;
			std::vector<std::thread> ts;
			for (unsigned t = 0; t < bx; t++)
				ts.emplace_back([&, t] { threadIdx = {t, 0, 0}; f(args...); /* a finished thread leaves the barriers, so the others never wait for it */ emu_block_bar->arrive_and_drop(); emu_warp_bar[t / 32]->arrive_and_drop(); });
			for (auto &x : ts) x.join();
			for (auto *p : wb) delete p;
		}
}

#endif
