package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"switchyard/importer"
)

func importCmd() *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "import FILE [-o OUT]",
		Short: "Convert a Clash/mihomo YAML or sing-box JSON configuration into switchyard TOML",
		Long: "Convert a Clash/mihomo YAML or sing-box JSON configuration into switchyard TOML, printed on\n" +
			"stdout (or written to OUT). What cannot be converted is listed on stderr as FILE:LINE: ITEM: WHY.\n" +
			"Exits 0 when the file was converted (even with problems), 1 when it is neither format.\n" +
			"Relative paths (providers, rule sets, Country.mmdb) stay relative: keep the output beside FILE.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			stderr := cmd.ErrOrStderr()
			path := args[0]
			content, err := readLimited(path, importer.MaxInput)
			if err != nil {
				fmt.Fprintf(stderr, "%s: %v\n", path, err)
				return exitError{1}
			}
			text, problems, err := importer.Convert(content, filepath.Base(path))
			if err != nil {
				fmt.Fprintf(stderr, "%s: %v\n", path, err)
				return exitError{1}
			}
			if out == "" {
				if _, err := cmd.OutOrStdout().Write(text); err != nil {
					return err
				}
			} else if err := writeFileAtomic(out, text); err != nil {
				fmt.Fprintf(stderr, "%s: %v\n", out, err)
				return exitError{1}
			}
			for _, p := range problems {
				fmt.Fprintln(stderr, p.Format(path))
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&out, "output", "o", "", "write the TOML to this file instead of stdout")
	return cmd
}

// readLimited reads the file at path, refusing one larger than limit.
func readLimited(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("larger than %d MiB", limit>>20)
	}
	return b, nil
}

// writeFileAtomic writes data to path through a temporary file in the same
// folder, readable by the owner only (the output holds passwords).
func writeFileAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".import-*.toml")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
