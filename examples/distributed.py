"""Data-parallel constrained generation over several processes (one per GPU, or CPU processes).

    torchrun --nproc_per_node=2 examples/distributed.py            # offline, tiny random model
    torchrun --nproc_per_node=8 examples/distributed.py --model Qwen/Qwen2.5-0.5B-Instruct
    python examples/distributed.py                                 # one process, no torchrun

Each rank takes its share of the prompts (prompt i goes to rank i % world_size),
builds its own RegexProcessor (one pattern per prompt of its share), generates
7 samples per prompt, checks them with re.fullmatch, and the results are
gathered on rank 0, which prints the (samples, batch) grid over all prompts.
The backend is nccl on GPUs and gloo on CPU. Offline, every rank builds the
tiny model from the same seed, so all ranks hold the same weights.
"""

import contextlib
import io
import os
import re
import sys

import torch
import torch.distributed as dist
from _common import check, load, parse_args, print_grid

from hf_constrained import RegexProcessor

PROMPTS = [
    "Date:", "E-mail:", "City:", "Time:", "Code:", "Answer yes or no:",
]
PATTERNS = [
    r"(19|20)[0-9]{2}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])",
    r"[a-z]{3,8}@[a-z]{3,8}\.(com|org|net)",
    r"Paris|London|Tokyo|New York|Berlin",
    r"([01][0-9]|2[0-3]):[0-5][0-9]",
    r"[A-Z]{3}-[0-9]{4}",
    r"yes|no",
]
NUM_SAMPLES = 7


def add_options(parser):
    parser.add_argument("-n", "--num-samples", type=int, default=NUM_SAMPLES)
    parser.add_argument("--prompts", type=int, default=len(PROMPTS),
                        help=f"use the first N of the {len(PROMPTS)} built-in prompts")


def main() -> int:
    args = parse_args(__doc__, add_options)
    distributed = "WORLD_SIZE" in os.environ
    rank = int(os.environ.get("RANK", 0))
    world = int(os.environ.get("WORLD_SIZE", 1))
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", world))
    if torch.cuda.is_available() and args.device in (None, "cuda"):
        gpus = torch.cuda.device_count()
        torch.cuda.set_device(local_rank % gpus)
        device = f"cuda:{local_rank % gpus}"
        # nccl wants one GPU per process; with fewer GPUs than processes, share them over gloo
        backend = "nccl" if gpus >= local_world else "gloo"
    else:
        device, backend = args.device or "cpu", "gloo"
    if distributed:
        if backend == "nccl":
            dist.init_process_group(backend, device_id=torch.device(device))
        else:
            dist.init_process_group(backend)

    # Every rank: same tokenizer, same weights (same seed), its own share of prompts.
    with contextlib.redirect_stdout(io.StringIO()) if rank else contextlib.nullcontext():
        tok, model = load(args, seed=args.seed, device=device)  # only rank 0 announces the model
    if distributed and args.model is None:  # the offline weights must agree across ranks
        checksum = torch.stack([p.detach().double().sum() for p in model.parameters()]).sum().reshape(1)
        checksum = checksum.to(device if backend == "nccl" else "cpu")
        sums = [torch.zeros_like(checksum) for _ in range(world)]
        dist.all_gather(sums, checksum)
        if any(not torch.equal(s, checksum) for s in sums):
            raise SystemExit(f"[rank {rank}] model weights differ between ranks")
    prompts, patterns = PROMPTS[: args.prompts], PATTERNS[: args.prompts]
    mine = list(range(rank, len(prompts), world))
    results = []
    if mine:
        my_prompts = [prompts[i] for i in mine]
        my_patterns = [patterns[i] for i in mine]
        proc = RegexProcessor(my_patterns, tok, eos_token_id=model.generation_config.eos_token_id)
        inputs = tok(my_prompts, return_tensors="pt", padding=True).to(device)
        torch.manual_seed(args.seed + rank)
        with torch.no_grad():
            out = model.generate(**inputs, logits_processor=[proc], do_sample=True,
                                 num_return_sequences=args.num_samples,
                                 max_new_tokens=args.max_new_tokens, pad_token_id=tok.pad_token_id)
        for i, gen in zip(mine, proc.generations(out)):
            seqs = [(s.text, s.finished) for s in gen.sequences]
            ok = all(f and re.fullmatch(patterns[i], t) for t, f in seqs)
            results.append({"prompt": i, "rank": rank, "texts": seqs, "ok": bool(ok)})
        print(f"[rank {rank}/{world}] prompts {mine}: "
              f"{'all match' if all(r['ok'] for r in results) else 'MISMATCH'}", flush=True)

    if distributed:
        gathered = [None] * world
        dist.all_gather_object(gathered, results)
        everything = [r for part in gathered for r in part]
    else:
        everything = results
    everything.sort(key=lambda r: r["prompt"])
    all_ok = len(everything) == len(prompts) and all(r["ok"] for r in everything)

    if rank == 0:
        from hf_constrained import Generation, Sequence

        gens = [Generation(prompt_index=r["prompt"],
                           sequences=[Sequence(token_ids=[], text=t, finished=f) for t, f in r["texts"]])
                for r in everything]
        grid, failures = check(gens, patterns)
        print_grid(grid, [f"{p} (rank {r['rank']})" for p, r in zip(prompts, everything)])
        total = sum(len(r["texts"]) for r in everything)
        print(f"\n{'OK' if all_ok else 'FAIL'}: {total - failures} of {total} outputs from "
              f"{world} process(es) ({backend}) match their pattern (re.fullmatch)")
    code = 0 if all_ok else 1
    if distributed:
        dist.barrier()
        dist.destroy_process_group()
        # torch's gloo worker threads can abort the interpreter's own shutdown afterwards
        # ("terminate called without an active exception", SIGABRT, seen once under CI
        # load): the work is done and flushed, so leave without that teardown
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


if __name__ == "__main__":
    sys.exit(main())
