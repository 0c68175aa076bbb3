package main

import (
	"fmt"
	"strings"

	"github.com/nats-io/nkeys"
	"github.com/spf13/cobra"

	"github.com/dovetail-dev/dovetail/shared/queue/nats/natsauth"
)

// newNATSAuthorizationCommand prints the nats-server "authorization" block that admits each
// Dovetail role with its permissions (natsauth.For), for an operator's own NATS server.
func newNATSAuthorizationCommand() *cobra.Command {
	var cluster string
	var keys []string
	cmd := &cobra.Command{
		Use:   "nats-authorization --cluster C --public-key ROLE=U... [--public-key ...]",
		Short: "Print the nats-server authorization block for Dovetail's NATS roles (for your own server)",
		Long: "Prints the nats.conf \"authorization\" block with one nkey user per given role and that role's\n" +
			"permissions (roles: " + fmt.Sprint(natsauth.Roles) + "; docs/install.md, \"NATS: authentication, TLS and roles\").\n" +
			"Public keys only: nk -inkey SEED -pubout prints one; a seed is refused.",
		SilenceUsage: true,
		Args:         cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			m := map[natsauth.Role]string{}
			for _, kv := range keys {
				role, key, ok := strings.Cut(kv, "=")
				if !ok {
					return fmt.Errorf("--public-key %q: must be ROLE=PUBLICKEY", kv)
				}
				if _, dup := m[natsauth.Role(role)]; dup {
					return fmt.Errorf("--public-key: role %s given twice", role)
				}
				// The seed check comes first (ServerAuthorization): never echo a seed back.
				if !strings.HasPrefix(key, "S") && !nkeys.IsValidPublicUserKey(key) {
					return fmt.Errorf("--public-key %s=%q: not a valid nkey user public key (checksum or prefix)", role, key)
				}
				m[natsauth.Role(role)] = key
			}
			conf, err := natsauth.ServerAuthorization(cluster, m)
			if err != nil {
				return fmt.Errorf("--cluster, --public-key: %w", err)
			}
			_, err = fmt.Fprint(cmd.OutOrStdout(), conf)
			return err
		},
	}
	cmd.Flags().StringVar(&cluster, "cluster", "", "the cluster (RFC 1123 label) whose subjects the permissions name (required)")
	cmd.Flags().StringArrayVar(&keys, "public-key", nil, "ROLE=PUBLICKEY, repeated: the nkey user public key of each role to admit")
	_ = cmd.MarkFlagRequired("cluster")
	return cmd
}
