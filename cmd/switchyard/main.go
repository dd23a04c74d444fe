// Command switchyard is a proxy router: local traffic comes in through SOCKS5
// and HTTP inbounds and leaves, routed by rules, through its outbounds.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

// exitError carries an exit code for a failure already reported.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit %d", e.code) }

func main() {
	raiseFileLimit()
	root := &cobra.Command{
		Use:           "switchyard",
		Short:         "A proxy router",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	run := runCmd()
	// Without a subcommand switchyard runs, on the embedded default unless
	// -c names a file.
	root.RunE = run.RunE
	root.Args = cobra.NoArgs
	root.Flags().AddFlagSet(run.Flags())
	root.AddCommand(run, checkCmd(), versionCmd())
	root.AddCommand(probeCmd())
	root.AddCommand(importCmd())
	root.AddCommand(providerCmd())
	if err := root.Execute(); err != nil {
		var ee exitError
		if errors.As(err, &ee) {
			os.Exit(ee.code)
		}
		fmt.Fprintln(os.Stderr, "switchyard:", err)
		os.Exit(2)
	}
}
