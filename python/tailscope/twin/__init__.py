"""From a user's traces to a runnable twin (docs/twin.md).

- `spans`: the spans of Jaeger/OTLP traces, read by `tailscope-critpath --span-dump` (one reader per
  format: the engine's), with the analyzer's RPC pairs and probe delays.
- `fit`: durations fitted to the topology's distribution kinds, with goodness of fit.
- `infer`: the topology (services, endpoints, stages, distributions) and what could not be inferred.
- `structure`: a topology's call structure in canonical form (what "structurally equal" means).
- `validate`: the twin run under the traces' model at their rate, compared with the traces.
- `advise`: the twin under alternative models, pool sizes and placements, ranked by predicted p99 and
  max rate at the p99 objective, with the validation error and the leader's sensitivity.
"""
