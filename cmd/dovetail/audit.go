package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/dovetail-dev/dovetail/shared/telemetry"
)

func newAuditCommand() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "audit [LOGFILE ...]",
		Short: "Print the decision audit records of functions' log streams (JSON lines; - or none: stdin)",
		Long: "Every decision a function makes (launch, delete, replace, drain) is one structured log record:\n" +
			"what, why (the rule and its inputs), $/h before and after, and for launches the lower bound and a\n" +
			"static node group's price for the same pods. audit reads them back from log files (kubectl logs,\n" +
			"an exported CloudWatch or Azure Monitor stream, `dovetail dev -v` stderr) and prints them.",
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if output != "table" && output != "json" {
				return fmt.Errorf("--output %q: must be table or json", output)
			}
			if len(args) == 0 {
				args = []string{"-"}
			}
			var records []telemetry.Audit
			for _, path := range args {
				r := io.Reader(cmd.InOrStdin())
				if path != "-" {
					f, err := os.Open(path)
					if err != nil {
						return err
					}
					defer f.Close()
					r = f
				}
				if err := telemetry.ReadAudit(r, func(a telemetry.Audit) error { records = append(records, a); return nil }); err != nil {
					return fmt.Errorf("%s: %w", path, err)
				}
			}
			if output == "json" {
				enc := json.NewEncoder(cmd.OutOrStdout())
				for _, a := range records {
					if err := enc.Encode(a); err != nil {
						return err
					}
				}
				return nil
			}
			return writeAuditTable(cmd.OutOrStdout(), records)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "table", "table or json (one record per line)")
	return cmd
}

func writeAuditTable(w io.Writer, records []telemetry.Audit) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "FUNCTION\tACTION\tDECISION\tRULE\tNODES\tNODECLAIMS\t$/H BEFORE\t$/H AFTER\tLOWER BOUND\tSTATIC BASELINE")
	for _, a := range records {
		bound, base := "-", "-"
		if a.LowerBound > 0 {
			bound = fmt.Sprintf("%.4f", a.LowerBound)
		}
		if b := a.StaticBaseline; b != nil {
			base = fmt.Sprintf("%.4f (%d × %s)", b.PricePerHour, b.Nodes, b.InstanceType)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%.4f\t%.4f\t%s\t%s\n", a.Function, a.Action, a.Decision, a.Rule,
			orDash(strings.Join(a.Nodes, ",")), orDash(strings.Join(a.NodeClaims, ",")), a.PriceBefore, a.PriceAfter, bound, base)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, a := range records {
		if a.Why != "" {
			fmt.Fprintf(w, "%s %s %s: %s\n", a.Function, a.Action, a.Decision, a.Why)
		}
	}
	return nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
