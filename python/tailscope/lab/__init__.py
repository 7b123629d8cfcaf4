"""Lab: the engines, process lifetime, machine facts, lab hosts, load agents, topologies and deployments."""
