#!/usr/bin/python3
"""PyTorch peer of meshtp's GPT training step: the same model trained the same way by PyTorch.

Model (as model/gpt.hpp): byte-level GPT, vocab 256, learned position embedding, L pre-LN
blocks  x += proj(attn(ln1(x))),  x += fc2(gelu_tanh(fc1(ln2(x)))),  a final LayerNorm, the
LM head tied to the token embedding, mean cross-entropy; fp32 everywhere. Parameters carry
meshtp's names and shapes (nn.Linear layout [out, in]); AdamW with decoupled weight decay on
the matrices and embeddings only, meshtp's warmup + cosine learning rate and global-norm
clipping; batches from a port of train/byte_corpus.cpp's sampler, so step t sees the bytes
meshtp's step t sees.

Tensor parallelism (--tp N, N processes over gloo, Megatron style, written out by hand):
qkv and fc1 are column-parallel (each rank holds whole heads / a slice of the 4h features),
proj and fc2 row-parallel with an all-reduce of their outputs; the conjugate operators f
(identity forward, all-reduce backward) and g (all-reduce forward, identity backward) of
Megatron-LM §3 make autograd produce the right gradients. Embeddings, LayerNorms and the
head are replicated (their gradients are identical on every rank), so unlike meshtp's
vocabulary-parallel head the peer computes the head on every rank.

Timing: one step = sampling, forward, backward, clipping and the AdamW update, started
together after a barrier; a step's time is the max over ranks; the median over the timed
steps is reported, with model FLOP/s per rank from the same formula meshtp uses:
  L·(72·b·s·h² + 12·b·s²·h) + 6·b·s·h·V per step.

  gpt_torch.py --model models/small.json --tp 2 --steps 10 --json
  gpt_torch.py --model ... --resume ckpt/checkpoint.safetensors --steps 6   # losses only
"""
import argparse
import json
import math
import os
import struct
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F

MASK64 = (1 << 64) - 1


# ---- data: train/byte_corpus.cpp and tensor/random.cpp, ported --------------------------------

def splitmix64(x):
    x = (x + 0x9E3779B97F4A7C15) & MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK64
    return x ^ (x >> 31)


def uniform_at(seed, index):
    bits = splitmix64((splitmix64(seed) + index) & MASK64)
    unit = ((bits >> 40) + 1.0) / 16777216.0
    return float(np.float32(2.0 * unit - 1.0))


class ByteCorpus:
    def __init__(self, path, validation_fraction=0.05):
        if os.path.isdir(path):
            # as train/byte_corpus.cpp: regular files, also through symlinks (fortune's *.u8
            # links count again), not fortune's .dat indexes; sorted by path
            files = sorted(os.path.join(path, f) for f in os.listdir(path)
                           if os.path.isfile(os.path.join(path, f)) and not f.endswith('.dat'))
        else:
            files = [path]
        self.bytes = b''.join(open(f, 'rb').read() for f in files)
        n = len(self.bytes)
        self.split = n - int(float(n) * validation_fraction)

    def sample(self, seed, step, batch, row_begin, rows, seq):
        starts = self.split - seq
        stream = seed ^ 0x7261696e
        tokens = np.empty((rows, seq), dtype=np.int64)
        targets = np.empty((rows, seq), dtype=np.int64)
        for r in range(rows):
            u = 0.5 * (uniform_at(stream, step * batch + row_begin + r) + 1.0)
            offset = min(starts - 1, int(u * starts))
            chunk = np.frombuffer(self.bytes, dtype=np.uint8, count=seq + 1, offset=offset)
            tokens[r] = chunk[:-1]
            targets[r] = chunk[1:]
        return torch.from_numpy(tokens), torch.from_numpy(targets)


def lr_at(step, peak, low, warmup, total):  # train/lr_schedule.hpp
    if step < warmup:
        return peak * (step + 1) / warmup
    progress = min(max((step - warmup) / max(1, total - warmup), 0.0), 1.0)
    return low + 0.5 * (peak - low) * (1.0 + math.cos(math.pi * progress))


def read_safetensors(path):
    with open(path, 'rb') as f:
        size = struct.unpack('<Q', f.read(8))[0]
        header = json.loads(f.read(size))
        data = f.read()
    meta = header.pop('__metadata__', {})
    tensors = {}
    for name, t in header.items():
        assert t['dtype'] == 'F32', (name, t['dtype'])
        a, b = t['data_offsets']
        tensors[name] = torch.from_numpy(
            np.frombuffer(data[a:b], dtype=np.float32).copy()).reshape(t['shape'])
    return tensors, meta


# ---- the model -----------------------------------------------------------------------------

class Peer:
    """Parameters by meshtp name, this rank's shard of each; forward builds the graph."""

    def __init__(self, cfg, tp, rank, seed=1):
        self.cfg, self.tp, self.rank = cfg, tp, rank
        h, s, V, L = cfg['hidden'], cfg['seq'], 256, cfg['layers']
        assert cfg['heads'] % tp == 0 and h % tp == 0, 'heads and hidden must divide by --tp'
        g = torch.Generator().manual_seed(seed)
        self.params = {}

        def normal(*shape, std=0.02):
            return torch.randn(*shape, generator=g) * std
        full = {'wte': normal(V, h), 'wpe': normal(s, h),
                'lnf.weight': torch.ones(h), 'lnf.bias': torch.zeros(h)}
        for i in range(L):
            p = f'layers.{i}.'
            full.update({p + 'ln1.weight': torch.ones(h), p + 'ln1.bias': torch.zeros(h),
                         p + 'attn.qkv.weight': normal(3 * h, h),
                         p + 'attn.qkv.bias': torch.zeros(3 * h),
                         p + 'attn.proj.weight': normal(h, h, std=0.02 / math.sqrt(2 * L)),
                         p + 'attn.proj.bias': torch.zeros(h),
                         p + 'ln2.weight': torch.ones(h), p + 'ln2.bias': torch.zeros(h),
                         p + 'mlp.fc1.weight': normal(4 * h, h),
                         p + 'mlp.fc1.bias': torch.zeros(4 * h),
                         p + 'mlp.fc2.weight': normal(h, 4 * h, std=0.02 / math.sqrt(2 * L)),
                         p + 'mlp.fc2.bias': torch.zeros(h)})
        self.load(full)

    def shard(self, name, t):
        """This rank's block of global tensor t (Megatron column/row-parallel slices)."""
        if self.tp == 1:
            return t.clone()
        h, r, n = self.cfg['hidden'], self.rank, self.tp
        if name.endswith('attn.qkv.weight') or name.endswith('attn.qkv.bias'):
            w = h // n  # q, k and v each: whole heads of this rank
            return torch.cat([t[j * h + r * w: j * h + (r + 1) * w] for j in range(3)]).clone()
        if name.endswith('mlp.fc1.weight') or name.endswith('mlp.fc1.bias'):
            w = 4 * h // n
            return t[r * w:(r + 1) * w].clone()
        if name.endswith('attn.proj.weight') or name.endswith('mlp.fc2.weight'):
            w = t.shape[1] // n
            return t[:, r * w:(r + 1) * w].clone()
        return t.clone()  # replicated

    def sharded(self, name):
        return self.tp > 1 and any(name.endswith(k) for k in (
            'attn.qkv.weight', 'attn.qkv.bias', 'mlp.fc1.weight', 'mlp.fc1.bias',
            'attn.proj.weight', 'mlp.fc2.weight'))

    def load(self, full):
        self.params = {k: self.shard(k, v).requires_grad_() for k, v in full.items()}

    @staticmethod
    def decays(name):  # model/gpt.cpp Gpt::decays: matrices and embeddings, not LN or biases
        return name in ('wte', 'wpe') or name.endswith(
            ('qkv.weight', 'proj.weight', 'fc1.weight', 'fc2.weight'))

    def forward(self, tokens, targets):
        P, cfg, tp = self.params, self.cfg, self.tp
        B, T = tokens.shape
        h, nh = cfg['hidden'], cfg['heads'] // tp
        hd = h // cfg['heads']
        mask = torch.ones(T, T, dtype=torch.bool).triu(1)
        x = P['wte'][tokens] + P['wpe'][:T]
        for i in range(cfg['layers']):
            p = f'layers.{i}.'
            a = F.layer_norm(x, (h,), P[p + 'ln1.weight'], P[p + 'ln1.bias'], 1e-5)
            qkv = F.linear(Copy.apply(a, tp), P[p + 'attn.qkv.weight'], P[p + 'attn.qkv.bias'])
            q, k, v = qkv.view(B, T, 3, nh, hd).permute(2, 0, 3, 1, 4)
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
            att = att.masked_fill(mask, float('-inf')).softmax(dim=-1)
            y = (att @ v).transpose(1, 2).reshape(B, T, nh * hd)
            x = x + Reduce.apply(F.linear(y, P[p + 'attn.proj.weight']), tp) + P[p + 'attn.proj.bias']
            m = F.layer_norm(x, (h,), P[p + 'ln2.weight'], P[p + 'ln2.bias'], 1e-5)
            m = F.gelu(F.linear(Copy.apply(m, tp), P[p + 'mlp.fc1.weight'], P[p + 'mlp.fc1.bias']),
                       approximate='tanh')
            x = x + Reduce.apply(F.linear(m, P[p + 'mlp.fc2.weight']), tp) + P[p + 'mlp.fc2.bias']
        x = F.layer_norm(x, (h,), P['lnf.weight'], P['lnf.bias'], 1e-5)
        logits = F.linear(x, P['wte'])
        return F.cross_entropy(logits.view(-1, 256), targets.reshape(-1))

    def grad_norm(self):
        """‖g‖ over the global model: shards summed over ranks, replicated tensors once."""
        sharded = torch.zeros((), dtype=torch.float64)
        replicated = torch.zeros((), dtype=torch.float64)
        for name, t in self.params.items():
            sq = t.grad.double().pow(2).sum()
            if self.sharded(name):
                sharded += sq
            else:
                replicated += sq
        if self.tp > 1:
            dist.all_reduce(sharded)
        return math.sqrt(float(sharded + replicated))


class Copy(torch.autograd.Function):  # Megatron's f: identity forward, all-reduce backward
    @staticmethod
    def forward(ctx, x, tp):
        ctx.tp = tp
        return x

    @staticmethod
    def backward(ctx, g):
        if ctx.tp > 1:
            g = g.contiguous()
            dist.all_reduce(g)
        return g, None


class Reduce(torch.autograd.Function):  # Megatron's g: all-reduce forward, identity backward
    @staticmethod
    def forward(ctx, x, tp):
        if tp > 1:
            ctx.mark_dirty(x)  # x is the row-parallel product, reduced in place
            dist.all_reduce(x)
        return x

    @staticmethod
    def backward(ctx, g):
        return g, None


def step_flops(cfg):
    b, s, h, L = cfg['batch'], cfg['seq'], cfg['hidden'], cfg['layers']
    return L * (72 * b * s * h * h + 12 * b * s * s * h) + 6 * b * s * h * 256


# ---- training --------------------------------------------------------------------------------

def run(rank, args, cfg, out_queue):
    torch.set_num_threads(1)
    if args.tp > 1:
        dist.init_process_group('gloo', init_method=f'tcp://127.0.0.1:{args.port}',
                               rank=rank, world_size=args.tp)
    model = Peer(cfg, args.tp, rank, seed=args.seed)
    first_step = 0
    state = None
    if args.resume:
        full, meta = read_safetensors(args.resume)
        model.load({k: v for k, v in full.items() if not k.startswith('adam.')})
        first_step = int(meta['step'])
        state = (full, int(meta['adam_steps']))
    decay = [t for k, t in model.params.items() if model.decays(k)]
    other = [t for k, t in model.params.items() if not model.decays(k)]
    opt = torch.optim.AdamW([{'params': decay, 'weight_decay': args.weight_decay},
                             {'params': other, 'weight_decay': 0.0}],
                            lr=args.lr, betas=(0.9, 0.95), eps=1e-8)
    if state is not None:
        full, adam_steps = state
        for k, t in model.params.items():
            opt.state[t] = {'step': torch.tensor(float(adam_steps)),
                            'exp_avg': model.shard(k, full['adam.m.' + k]),
                            'exp_avg_sq': model.shard(k, full['adam.v.' + k])}
    corpus = ByteCorpus(args.data)
    losses, times = [], []
    for step in range(first_step, args.steps):
        if args.tp > 1:
            dist.barrier()
        t0 = time.perf_counter()
        tokens, targets = corpus.sample(args.seed, step, cfg['batch'], 0, cfg['batch'], cfg['seq'])
        for t in model.params.values():
            t.grad = None
        loss = model.forward(tokens, targets)
        loss.backward()
        norm = model.grad_norm()
        if args.grad_clip > 0 and norm > args.grad_clip:
            for t in model.params.values():
                t.grad.mul_(args.grad_clip / norm)
        for group in opt.param_groups:
            group['lr'] = lr_at(step, args.lr, args.min_lr, args.warmup, args.steps)
        opt.step()
        elapsed = torch.tensor([time.perf_counter() - t0])
        if args.tp > 1:
            dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
        losses.append(float(loss))
        times.append(float(elapsed))
    if rank == 0:
        out_queue.put((losses, times))
    if args.tp > 1:
        dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--model', required=True, help="meshtp model JSON (models/NAME.json)")
    ap.add_argument('--tp', type=int, default=1)
    ap.add_argument('--steps', type=int, default=10, help='last step (exclusive), as meshtp --steps')
    ap.add_argument('--warmup-steps', type=int, default=2, help='untimed steps at the start')
    ap.add_argument('--data', default='/usr/share/games/fortunes')
    ap.add_argument('--resume', help='a meshtp checkpoint: weights, AdamW moments, step')
    ap.add_argument('--seed', type=int, default=1)
    ap.add_argument('--lr', type=float, default=1e-3)
    ap.add_argument('--min-lr', type=float, default=1e-4)
    ap.add_argument('--warmup', type=int, default=10)
    ap.add_argument('--weight-decay', type=float, default=0.1)
    ap.add_argument('--grad-clip', type=float, default=1.0)
    ap.add_argument('--port', type=int, default=29517)
    ap.add_argument('--json', action='store_true')
    args = ap.parse_args()
    cfg = json.load(open(args.model))
    ctx = mp.get_context('spawn')
    queue = ctx.Queue()
    if args.tp == 1:
        run(0, args, cfg, queue)
    else:
        mp.spawn(run, args=(args, cfg, queue), nprocs=args.tp, join=True)
    losses, times = queue.get()
    timed = sorted(times[args.warmup_steps:]) or sorted(times)
    step_s = timed[len(timed) // 2] if len(timed) % 2 else 0.5 * (timed[len(timed) // 2 - 1] + timed[len(timed) // 2])
    result = {'system': 'pytorch', 'torch': torch.__version__, 'model': cfg.get('name', ''),
              'ranks': args.tp, 'steps': len(timed), 'step_s': step_s,
              'gflops_per_rank': step_flops(cfg) / args.tp / step_s / 1e9, 'losses': losses}
    if args.json:
        print(json.dumps(result))
    else:
        print(f"pytorch {torch.__version__} tp={args.tp}: step {step_s * 1e3:.2f} ms, "
              f"{result['gflops_per_rank']:.2f} GFLOP/s per rank; losses "
              + ' '.join(f'{l:.4f}' for l in losses))


if __name__ == '__main__':
    sys.exit(main())
