// Command probe204 is the probe URL of bench/groups/run.sh: an HTTP server
// on the given loopback address that answers every request with 204 No
// Content and counts them (GET /count answers the number so far).
package main

import (
	"fmt"
	"net/http"
	"os"
	"sync/atomic"
	"time"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: probe204 127.0.0.1:PORT")
		os.Exit(2)
	}
	var n atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("/count", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, n.Load())
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		w.WriteHeader(http.StatusNoContent)
	})
	srv := &http.Server{Addr: os.Args[1], Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	if err := srv.ListenAndServe(); err != nil {
		fmt.Fprintln(os.Stderr, "probe204:", err)
		os.Exit(1)
	}
}
