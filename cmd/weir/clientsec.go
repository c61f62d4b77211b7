package main

// The TLS and SASL flags of every client command (registered by clientFlags): one place, so
// `weir topic`, `produce`, `consume`, `group`, `txn`, `user`, `acl`, `cluster` and `bench` reach
// SSL, SASL_PLAINTEXT and SASL_SSL listeners the same way. The names follow the Kafka client
// settings they stand for (security.protocol is implied: --tls for SSL, --sasl-mechanism for
// SASL_*, both for SASL_SSL).

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// saslPasswordEnv is the environment variable a SASL password is read from when neither
// --sasl-password nor --sasl-password-file is given (a password on the command line shows in ps).
const saslPasswordEnv = "WEIR_SASL_PASSWORD"

// maxPasswordFileBytes bounds what --sasl-password-file reads.
const maxPasswordFileBytes = 64 << 10

// securityFlags are a client's TLS and SASL flags.
type securityFlags struct {
	tls                bool
	tlsCA, tlsCert     string
	tlsKey, tlsServer  string
	saslMechanism      string
	saslUser, saslPass string
	saslPassFile       string
}

func (s *securityFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&s.tls, "tls", false, "connect with TLS (SSL or SASL_SSL listeners)")
	fs.StringVar(&s.tlsCA, "tls-ca", "", "PEM file of the CA that signed the broker's certificate (default: the system's roots); implies --tls")
	fs.StringVar(&s.tlsCert, "tls-cert", "", "PEM client certificate for mutual TLS; implies --tls")
	fs.StringVar(&s.tlsKey, "tls-key", "", "PEM key of --tls-cert")
	fs.StringVar(&s.tlsServer, "tls-server-name", "", "name to verify the broker's certificate against (default: the host of each broker address)")
	fs.StringVar(&s.saslMechanism, "sasl-mechanism", "", "SASL mechanism: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (SASL_PLAINTEXT or SASL_SSL listeners)")
	fs.StringVar(&s.saslUser, "sasl-user", "", "SASL user name")
	fs.StringVar(&s.saslPass, "sasl-password", "", "SASL password (default: --sasl-password-file, else $"+saslPasswordEnv+")")
	fs.StringVar(&s.saslPassFile, "sasl-password-file", "", "file holding the SASL password (one line; a trailing newline is dropped)")
}

// password is the SASL password: --sasl-password, else --sasl-password-file, else the
// environment.
func (s *securityFlags) password() (string, error) {
	if s.saslPass != "" {
		if s.saslPassFile != "" {
			return "", errors.New("--sasl-password and --sasl-password-file: give one")
		}
		return s.saslPass, nil
	}
	if s.saslPassFile != "" {
		f, err := os.Open(s.saslPassFile)
		if err != nil {
			return "", fmt.Errorf("--sasl-password-file: %w", err)
		}
		defer f.Close()
		b := make([]byte, maxPasswordFileBytes+1)
		n, err := f.Read(b)
		if err != nil && n == 0 {
			return "", fmt.Errorf("--sasl-password-file %s: %w", s.saslPassFile, err)
		}
		if n > maxPasswordFileBytes {
			return "", fmt.Errorf("--sasl-password-file %s: longer than %d bytes", s.saslPassFile, maxPasswordFileBytes)
		}
		p := strings.TrimRight(string(b[:n]), "\r\n")
		if p == "" {
			return "", fmt.Errorf("--sasl-password-file %s is empty", s.saslPassFile)
		}
		return p, nil
	}
	return os.Getenv(saslPasswordEnv), nil
}

// opts returns the franz-go options the flags ask for.
func (s *securityFlags) opts() ([]kgo.Opt, error) {
	var opts []kgo.Opt
	if s.tls || s.tlsCA != "" || s.tlsCert != "" || s.tlsKey != "" || s.tlsServer != "" {
		tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: s.tlsServer}
		if s.tlsCA != "" {
			pem, err := os.ReadFile(s.tlsCA)
			if err != nil {
				return nil, fmt.Errorf("--tls-ca: %w", err)
			}
			tc.RootCAs = x509.NewCertPool()
			if !tc.RootCAs.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("--tls-ca %s: no PEM certificate in it", s.tlsCA)
			}
		}
		if s.tlsCert != "" || s.tlsKey != "" {
			if s.tlsCert == "" || s.tlsKey == "" {
				return nil, errors.New("--tls-cert and --tls-key go together")
			}
			cert, err := tls.LoadX509KeyPair(s.tlsCert, s.tlsKey)
			if err != nil {
				return nil, fmt.Errorf("--tls-cert/--tls-key: %w", err)
			}
			tc.Certificates = []tls.Certificate{cert}
		}
		opts = append(opts, kgo.DialTLSConfig(tc))
	}
	if s.saslMechanism == "" {
		if s.saslUser != "" || s.saslPass != "" || s.saslPassFile != "" {
			return nil, errors.New("--sasl-user and --sasl-password need --sasl-mechanism")
		}
		return opts, nil
	}
	if s.saslUser == "" {
		return nil, fmt.Errorf("--sasl-mechanism %s needs --sasl-user", s.saslMechanism)
	}
	pass, err := s.password()
	if err != nil {
		return nil, err
	}
	var m sasl.Mechanism
	switch strings.ToUpper(s.saslMechanism) {
	case "PLAIN":
		m = plain.Auth{User: s.saslUser, Pass: pass}.AsMechanism()
	case "SCRAM-SHA-256":
		m = scram.Auth{User: s.saslUser, Pass: pass}.AsSha256Mechanism()
	case "SCRAM-SHA-512":
		m = scram.Auth{User: s.saslUser, Pass: pass}.AsSha512Mechanism()
	default:
		return nil, fmt.Errorf("--sasl-mechanism %q: want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", s.saslMechanism)
	}
	return append(opts, kgo.SASL(m)), nil
}
