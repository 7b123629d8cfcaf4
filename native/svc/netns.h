// Network namespaces for lab hosts (docs/lab-hosts.md): the supervisor runs a
// deployment's services each inside its host's namespace, /run/netns/NAME as
// `ip netns` and `tailscope hosts up` make them. Entering one needs root
// (CAP_SYS_ADMIN); without a deployment nothing here runs.
//
// Why two ways in: a socket keeps the namespace it was created in. The
// supervisor creates a service's listener *inside* the host's namespace
// (in_netns: setns there and back, on its one thread), so the port — ephemeral
// or not — is known before any child starts and survives a restart, exactly
// as without a deployment; the child then enters the same namespace for good
// (enter_netns, after fork, before exec) so its outgoing calls leave from that
// host. Entering in the child alone would lose the first property; creating
// the listener alone would send the calls from the supervisor's namespace.
#pragma once

#include <functional>
#include <string>

namespace tailscope::svc {

// /run/netns/NAME, opened O_CLOEXEC. Throws std::invalid_argument naming the
// deployment host and saying what to do when it does not exist.
int open_netns(const std::string& host, const std::string& netns);

// Runs fn with the calling thread inside the namespace behind ns_fd (-1: here)
// and comes back, whatever fn does; returns what fn returns. `name` is for
// errors. Throws std::runtime_error when the namespace cannot be entered.
int in_netns(int ns_fd, const std::string& name, const std::function<int()>& fn);

// Moves the calling thread into the namespace behind ns_fd for good (-1: stays
// here). Async-signal-safe, for a forked child before exec; false on failure
// (errno says why).
bool enter_netns(int ns_fd);

}  // namespace tailscope::svc
