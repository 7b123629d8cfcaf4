"""From a user's traces to a runnable twin (docs/twin.md).

- the spans come from `tailscope.traces.spans` (read by `tailscope-critpath --span-dump`), which
  `tailscope.diagnose` reads too.
- `fit`: durations fitted to the topology's distribution kinds, with goodness of fit.
- `infer`: the topology (services, endpoints, stages, distributions) and what could not be inferred.
- `capacities`: `tailscope.diagnose`'s findings → the topology's capacities and fan-out limits, and the
  inferred service times the stages behind them are fitted to.
- `cpusplit`: per endpoint, whether its own time is CPU or waiting, and by which rule.
- `structure`: a topology's call structure in canonical form (what "structurally equal" means).
- `validate`: the twin run under the traces' model at their rate (and at a second recording's rate),
  compared with the traces.
- `advise`: the twin under alternative models, pool sizes and placements, ranked by predicted p99 and
  max rate at the p99 objective, with the validation error and the leader's sensitivity.
"""
