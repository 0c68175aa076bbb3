package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/dovetail-dev/dovetail/shared/commitments"
	"github.com/dovetail-dev/dovetail/shared/ledger"
	qnats "github.com/dovetail-dev/dovetail/shared/queue/nats"
	"github.com/dovetail-dev/dovetail/shared/queue/nats/natsauth"
)

func newCostCommand() *cobra.Command {
	var natsURL, cluster, until, htmlPath, by string
	var natsAuth natsauth.Client
	cmd := &cobra.Command{
		Use:   "cost [LOGFILE ...]",
		Short: "Print the cost ledger of the decision audit records: spend, savings against a static node group and against no consolidation, waste",
		Long: "cost reads the decision audit records (from log files in every format `dovetail audit` reads, or with\n" +
			"--nats from the cluster's audit subject) and accumulates each decision's effect on every NodePool's $/h,\n" +
			"priced as the plan priced it. A NodePool's $/h holds from one decision to the next, so spend is the\n" +
			"integral of that step function (USD); the static baseline is a Cluster-Autoscaler-style group of one\n" +
			"instance type for the pool's pods; \"no consolidation\" adds back every consolidation's saving; waste\n" +
			"prices the allocatable no pod requests (of the dominant resource). The ledger runs from the first\n" +
			"record to --until (RFC 3339; default the last record). --html FILE also writes a self-contained report\n" +
			"with charts ($/h against the baseline and the lower bound, decisions on the timeline, utilisation).",
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			var end time.Time
			if until != "" {
				t, err := time.Parse(time.RFC3339, until)
				if err != nil {
					return fmt.Errorf("--until %q: not an RFC 3339 time: %w", until, err)
				}
				end = t
			}
			if by != "hour" && by != "day" {
				return fmt.Errorf("--by %q: must be hour or day", by)
			}
			var l ledger.Ledger
			if natsURL != "" {
				if len(args) > 0 {
					return fmt.Errorf("--nats reads the audit subject: give no LOGFILE (got %s)", strings.Join(args, " "))
				}
				nc, err := qnats.Dial(natsURL, "dovetail-cost", cluster, natsauth.RoleAudit, natsAuth)
				if err != nil {
					return err
				}
				defer nc.Close()
				if err := qnats.ReadAudit(cmd.Context(), nc, cluster, false, l.Add); err != nil {
					return err
				}
			} else if err := ledgerFromFiles(cmd, args, &l); err != nil {
				return err
			}
			r := l.Report(end)
			if err := writeCostTable(cmd.OutOrStdout(), r, by); err != nil {
				return err
			}
			if htmlPath == "" {
				return nil
			}
			f, err := os.Create(htmlPath)
			if err != nil {
				return err
			}
			if err := ledger.WriteHTML(f, r); err != nil {
				f.Close()
				return fmt.Errorf("--html %s: %w", htmlPath, err)
			}
			return f.Close()
		},
	}
	cmd.Flags().StringVar(&natsURL, "nats", "", "read the audit subject of a NATS JetStream server (e.g. nats://127.0.0.1:4222) instead of log files")
	cmd.Flags().StringVar(&cluster, "cluster", "dev", "with --nats: the cluster whose records to read")
	natsAuth.AddFlags(cmd.Flags())
	cmd.Flags().StringVar(&until, "until", "", "integrate up to this time (RFC 3339, e.g. 2026-12-06T12:00:00Z); default the last record's time")
	cmd.Flags().StringVar(&htmlPath, "html", "", "also write a self-contained HTML report with charts to this file")
	cmd.Flags().StringVar(&by, "by", "hour", "the table's periods: hour or day (UTC)")
	return cmd
}

// ledgerFromFiles adds the records of each log file (- or none: stdin) to l; a line the reader
// skips is a warning naming its file and line (readAuditFiles, as `dovetail audit` reads them).
func ledgerFromFiles(cmd *cobra.Command, paths []string, l *ledger.Ledger) error {
	_, err := readAuditFiles(cmd, paths, l.Add)
	return err
}

// writeCostTable prints the ledger per NodePool, then per period (USD).
func writeCostTable(w io.Writer, r ledger.Report, by string) error {
	if r.From.IsZero() {
		_, err := fmt.Fprintln(w, "no priced decisions in the records")
		return err
	}
	fmt.Fprintf(w, "%s to %s (%.2f h), USD\n", r.From.UTC().Format(time.RFC3339), r.Until.UTC().Format(time.RFC3339), r.Total.Hours)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	row := func(name string, t ledger.Totals) {
		fmt.Fprintf(tw, "%s\t%.4f\t%.4f\t%.4f\t%.4f\t%.4f\t%.4f\t\n", name, t.Spend, t.StaticBaseline, t.SavingVsStatic,
			t.NoConsolidation, t.SavingVsNoConsolidation, t.Waste)
	}
	fmt.Fprintln(tw, "NODEPOOL\tSPEND\tSTATIC BASELINE\tSAVING VS STATIC\tNO CONSOLIDATION\tSAVING VS NO CONSOLIDATION\tWASTE\t")
	for _, p := range r.Pools {
		row(p.NodePool, p.Totals)
	}
	row("total", r.Total)
	fmt.Fprintln(tw, "\t\t\t\t\t\t\t")
	periods, layout := r.Hours, "2006-01-02T15:04Z"
	if by == "day" {
		periods, layout = r.Days, "2006-01-02"
	}
	fmt.Fprintln(tw, strings.ToUpper(by)+"\tSPEND\tSTATIC BASELINE\tSAVING VS STATIC\tNO CONSOLIDATION\tSAVING VS NO CONSOLIDATION\tWASTE\t")
	for _, p := range periods {
		row(p.Start.UTC().Format(layout), p.Totals)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(r.Commitments) == 0 {
		return nil
	}
	fmt.Fprintf(w, "\ncommitments as the decision of %s counted them:\n", r.CommitmentsAt.UTC().Format(time.RFC3339))
	if err := commitments.WriteUtilisation(w, r.Commitments); err != nil {
		return err
	}
	if r.CommitmentSavings > 0 {
		// The table's spend is at list: the commitments' saving is cluster-wide, not per pool.
		_, err := fmt.Fprintf(w, "spend at effective rates: %.4f USD (%.4f at list less %.4f the commitments saved)\n",
			r.EffectiveSpend, r.Total.Spend, r.CommitmentSavings)
		return err
	}
	return nil
}
