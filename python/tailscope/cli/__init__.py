"""The `tailscope` command: parse → call → print. One module per group of commands (run,
analyze, soak, lab, cluster, twin, diagnose); what they share (consoles, option types, failures) is in common.py.
Commands may import lower layers lazily: `tailscope --help` stays quick."""

from __future__ import annotations

import click

from tailscope.cli import analyze, cluster, diagnose, lab, run, soak, twin


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="tailscope")
def main() -> None:
    """tailscope: where does a microservice's tail latency come from?"""


main.add_command(run.doctor)
main.add_command(run.run)
main.add_command(run.bench)
main.add_command(run.runs)
main.add_command(run.report)
main.add_command(run.export)
main.add_command(analyze.analyze)
main.add_command(soak.soak)
main.add_command(lab.hosts)
main.add_command(lab.deploy)
main.add_command(cluster.cluster)
main.add_command(twin.topology)
main.add_command(twin.twin)
main.add_command(twin.advise)
main.add_command(diagnose.diagnose)
