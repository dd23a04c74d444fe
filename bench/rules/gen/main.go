// Command gen writes the rule-set configurations bench/rules/run.sh loads:
// n rules as switchyard TOML and as sing-box JSON.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"

	"switchyard/internal/rulegen"
)

func main() {
	n := flag.Int("n", 200000, "number of rules")
	toml := flag.String("toml", "", "write the switchyard configuration here")
	json := flag.String("singbox", "", "write the sing-box configuration here")
	flag.Parse()
	if err := write(*toml, *n, rulegen.TOML); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
	if err := write(*json, *n, rulegen.SingBox); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

func write(path string, n int, fn func(w io.Writer, n int) error) error {
	if path == "" {
		return nil
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := fn(f, n); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
