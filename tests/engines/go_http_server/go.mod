module tailscope.test/gohttp

go 1.21
