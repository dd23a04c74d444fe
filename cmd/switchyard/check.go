package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"switchyard/config"
	"switchyard/supervisor"
)

func checkCmd() *cobra.Command {
	var path string
	cmd := &cobra.Command{
		Use:   "check -c FILE",
		Short: "Validate a configuration and build everything it describes, without opening a socket",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := cmd.ErrOrStderr()
			s, warns, err := config.Load(path)
			if err != nil {
				var errs config.Errors
				if errors.As(err, &errs) {
					for _, e := range errs {
						fmt.Fprintln(out, e)
					}
				} else {
					fmt.Fprintln(out, err)
				}
				return exitError{1}
			}
			for _, w := range warns {
				fmt.Fprintln(out, "warning: "+w.Error())
			}
			if err := supervisor.Check(s); err != nil {
				fmt.Fprintf(out, "%s: %v\n", path, err)
				return exitError{1}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: configuration ok\n", path)
			return nil
		},
	}
	cmd.Flags().StringVarP(&path, "config", "c", "", "configuration file (TOML)")
	cmd.MarkFlagRequired("config")
	return cmd
}
