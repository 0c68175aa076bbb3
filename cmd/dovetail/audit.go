package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"

	"github.com/spf13/cobra"

	qnats "github.com/dovetail-dev/dovetail/shared/queue/nats"
	"github.com/dovetail-dev/dovetail/shared/queue/nats/natsauth"
	"github.com/dovetail-dev/dovetail/shared/telemetry"
)

func newAuditCommand() *cobra.Command {
	var output, natsURL, cluster string
	var follow bool
	var natsAuth natsauth.Client
	cmd := &cobra.Command{
		Use:   "audit [LOGFILE ...]",
		Short: "Print the decision audit records of functions' log streams (JSON lines; - or none: stdin)",
		Long: "Every decision a function makes (launch, delete, replace, drain) is one structured log record:\n" +
			"what, why (the rule and its inputs), $/h before and after, and for launches the lower bound and a\n" +
			"static node group's price for the same pods. audit reads them back from log files (kubectl logs,\n" +
			"an exported CloudWatch or Azure Monitor stream, `dovetail dev -v` stderr) and prints them as they are read.\n" +
			"It reads JSON lines, CloudWatch Logs exports to S3 (\"<timestamp> <message>\" lines), the JSON of\n" +
			"`aws logs filter-log-events` / `get-log-events`, and JSON arrays of log or audit records; a line it\n" +
			"cannot read (longer than 8 MiB, not JSON though it names a record, a record that does not decode)\n" +
			"is skipped with a warning naming its file and line.\n\n" +
			"In local dev and the NATS runtime every record is also published on the cluster's audit subject\n" +
			"(dovetail.<cluster>.audit); --nats URL --cluster C reads them from there (--follow: keep reading),\n" +
			"connecting as the audit role with --nats-nkey-seed or --nats-creds and --nats-tls-ca.",
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if output != "table" && output != "json" {
				return fmt.Errorf("--output %q: must be table or json", output)
			}
			if natsURL != "" {
				if len(args) > 0 {
					return fmt.Errorf("--nats reads the audit subject: give no LOGFILE (got %s)", strings.Join(args, " "))
				}
				return auditFromNATS(cmd, natsURL, cluster, natsAuth, follow, output)
			}
			if follow {
				return errors.New("--follow: only with --nats")
			}
			if len(args) == 0 {
				args = []string{"-"}
			}
			return auditFromFiles(cmd, args, output)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "table", "table or json (one record per line)")
	cmd.Flags().StringVar(&natsURL, "nats", "", "read the audit subject of a NATS JetStream server (local dev's URL, e.g. nats://127.0.0.1:4222) instead of log files")
	cmd.Flags().StringVar(&cluster, "cluster", "dev", "with --nats: the cluster whose records to read")
	natsAuth.AddFlags(cmd.Flags())
	cmd.Flags().BoolVarP(&follow, "follow", "F", false, "with --nats: keep printing new records (one JSON line or table row each) until interrupted")
	return cmd
}

// readAuditFiles reads the audit records of each log file (- or none: stdin;
// telemetry.ReadAuditStream's formats) into each, warning on stderr of every line it skips by
// file and line; it returns how many it skipped. Error: a file that cannot be opened or read, or
// each's, prefixed with the file.
func readAuditFiles(cmd *cobra.Command, paths []string, each func(telemetry.Audit) error) (int, error) {
	if len(paths) == 0 {
		paths = []string{"-"}
	}
	skipped := 0
	for _, path := range paths {
		r := io.Reader(cmd.InOrStdin())
		if path != "-" {
			f, err := os.Open(path)
			if err != nil {
				return skipped, err
			}
			defer f.Close()
			r = f
		}
		o := telemetry.AuditReadOptions{Skipped: func(s telemetry.AuditSkip) {
			skipped++
			fmt.Fprintf(cmd.ErrOrStderr(), "warning: %s: line %d skipped: %s\n", path, s.Line, s.Reason)
		}}
		if err := telemetry.ReadAuditStream(r, o, each); err != nil {
			return skipped, fmt.Errorf("%s: %w", path, err)
		}
	}
	return skipped, nil
}

// auditTableBlock is how many table rows are aligned and printed together: the table streams
// in blocks, so memory stays bounded however long the log.
const auditTableBlock = 256

// auditFromFiles prints the records of each log file (telemetry.ReadAuditStream's formats) as
// they are read, and warns on stderr of each line it skips, by file and line.
func auditFromFiles(cmd *cobra.Command, paths []string, output string) error {
	out, warn := cmd.OutOrStdout(), cmd.ErrOrStderr()
	enc := json.NewEncoder(out)
	var block []telemetry.Audit
	printed := false // a block of the table was written
	emit := func(a telemetry.Audit) error {
		if output == "json" {
			return enc.Encode(a)
		}
		block = append(block, a)
		if len(block) == auditTableBlock {
			err := writeAuditTable(out, block)
			block, printed = block[:0], true
			return err
		}
		return nil
	}
	skipped, err := readAuditFiles(cmd, paths, emit)
	if err != nil {
		return err
	}
	if output == "table" && (len(block) > 0 || !printed) { // the header alone for no records
		if err := writeAuditTable(out, block); err != nil {
			return err
		}
	}
	if skipped > 0 {
		fmt.Fprintf(warn, "warning: %d line(s) skipped; the records printed are not all the log holds\n", skipped)
	}
	return nil
}

// auditFromNATS prints the cluster's audit records from its stream; with follow each record as it
// comes (JSON lines, or table rows without alignment across records), until interrupted.
// It connects as the audit role (natsauth.RoleAudit: the audit subject only), with --nats-nkey-seed
// or --nats-creds and TLS; `dovetail dev` prints the flags for its embedded server.
func auditFromNATS(cmd *cobra.Command, url, cluster string, auth natsauth.Client, follow bool, output string) error {
	nc, err := qnats.Dial(url, "dovetail-audit", cluster, natsauth.RoleAudit, auth)
	if err != nil {
		return err
	}
	defer nc.Close()
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var records []telemetry.Audit
	enc := json.NewEncoder(cmd.OutOrStdout())
	err = qnats.ReadAudit(ctx, nc, cluster, follow, func(a telemetry.Audit) error {
		switch {
		case output == "json":
			return enc.Encode(a)
		case follow:
			return writeAuditTable(cmd.OutOrStdout(), []telemetry.Audit{a})
		}
		records = append(records, a)
		return nil
	})
	if err != nil || output == "json" || follow {
		return err
	}
	return writeAuditTable(cmd.OutOrStdout(), records)
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
