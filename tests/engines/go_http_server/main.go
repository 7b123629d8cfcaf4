// A Go net/http server for tests/engines/test_load_go_http.py: tailscope-load
// against the HTTP server most services are written with, whose IdleTimeout
// closes keep-alive connections between requests.
package main

import (
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
)

func main() {
	idle := flag.Duration("idle-timeout", 0, "http.Server.IdleTimeout (0: none)")
	flag.Parse()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("{\"listening\": %d}\n", ln.Addr().(*net.TCPAddr).Port)
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") })
	server := &http.Server{Handler: handler, IdleTimeout: *idle}
	fmt.Fprintln(os.Stderr, server.Serve(ln))
}
