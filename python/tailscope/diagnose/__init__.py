"""Diagnose a traced system tailscope did not build (docs/diagnose.md): from span timings alone, the
concurrency of each operation and call site, hidden capacities by queue inference, bounded fan-outs,
sequential chains and the services that grow in the slow requests.

- `concurrency`: the in-flight count over time (a sweep over span intervals).
- `queue`: queue inference (FCFS with c servers) and the fit of each candidate c.
- `capacity`: the choice of c, its evidence and confidence, the halves of the recording.
- `calls`: bounded fan-out (waves of k) and sequential chains of one parent's calls.
- `tail`: the critical path of the slowest 1 % against the middle 50 %.
- `diagnosis`: traces → all of the above as values, the `tailscope.diagnosis/1` document, the lines.

Below `twin` (a twin that queues is fitted to what this finds) and above `traces` (it reads the spans).
"""
