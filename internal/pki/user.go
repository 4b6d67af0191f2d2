package pki

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// UserSecret is one user-provided certificate Secret (kubernetes.io/tls shape: tls.crt, tls.key,
// ca.crt), as cert-manager writes it. tls.crt may carry intermediates after the leaf.
type UserSecret struct {
	Name string
	Data map[string][]byte
}

// UserCertificates are the Secrets a cluster with user-provided TLS runs with: Server and
// OperatorClient when client traffic is UserProvided, Peer when peer traffic is; nil when unused.
type UserCertificates struct {
	Server, OperatorClient, Peer *UserSecret
}

// UserNames are the names the user's certificates must be valid for.
type UserNames struct {
	// ClientServiceHost is the name the operator (and its backup Jobs) verify the server certificate for.
	ClientServiceHost string
	// PeerWildcards (*.<cluster>-peer.<ns>.svc and the same under .cluster.local) must be DNS names of
	// the peer certificate: members are created under names nobody knows in advance; each dials the
	// others by the first, and checks that a caller's address resolves back under one of them.
	PeerWildcards []string
}

// UserProblem is why a user-provided certificate cannot be used: the Secret and what is wrong. It
// holds no key material, so it may go to status and events.
type UserProblem struct {
	Secret  string
	Problem string
}

func (p *UserProblem) Error() string { return fmt.Sprintf("Secret %s: %s", p.Secret, p.Problem) }

// CheckUserCertificates says why the user's certificates cannot run the cluster, or nil: every
// member and the operator must be able to complete every handshake they make with them, or the
// operator would start members that cannot talk to each other or be reached. The first problem
// found is reported; fixing it shows the next.
//
//   - Each Secret: tls.crt, tls.key and ca.crt present, a matching key pair, valid now.
//   - Server: verifies against the operator client Secret's ca.crt (what the operator trusts) as a
//     server for ClientServiceHost, and against its own ca.crt as a client (etcd's gRPC gateway
//     dials the member with the server certificate, and the member checks it like any client's).
//   - OperatorClient: verifies as a client against the server Secret's ca.crt (--trusted-ca-file).
//   - Peer: carries PeerWildcards, and verifies against its own ca.crt (--peer-trusted-ca-file) as a
//     server and as a client (each member dials the others).
func CheckUserCertificates(in UserCertificates, names UserNames, now time.Time) error {
	parsed := map[*UserSecret]*keyPair{}
	for _, s := range []*UserSecret{in.Server, in.OperatorClient, in.Peer} {
		if s == nil {
			continue
		}
		kp, err := parseKeyPair(s, now)
		if err != nil {
			return err
		}
		parsed[s] = kp
	}
	if in.Server != nil && in.OperatorClient != nil {
		srv, op := parsed[in.Server], parsed[in.OperatorClient]
		if err := srv.verify(op.roots, x509.ExtKeyUsageServerAuth, names.ClientServiceHost); err != nil {
			return &UserProblem{in.Server.Name, fmt.Sprintf("the operator cannot verify it as the server certificate for %s with the ca.crt of Secret %s: %v",
				names.ClientServiceHost, in.OperatorClient.Name, err)}
		}
		if err := srv.verify(srv.roots, x509.ExtKeyUsageClientAuth, ""); err != nil {
			return &UserProblem{in.Server.Name, fmt.Sprintf("its own ca.crt does not accept it as a client certificate, which etcd's gRPC gateway presents to the member: %v", err)}
		}
		if err := op.verify(srv.roots, x509.ExtKeyUsageClientAuth, ""); err != nil {
			return &UserProblem{in.OperatorClient.Name, fmt.Sprintf("the members do not accept it as a client certificate (they trust the ca.crt of Secret %s): %v", in.Server.Name, err)}
		}
	}
	if in.Peer != nil {
		peer := parsed[in.Peer]
		var lacks []string
		for _, w := range names.PeerWildcards {
			if !slices.ContainsFunc(peer.leaf.DNSNames, func(n string) bool { return strings.EqualFold(n, w) }) {
				lacks = append(lacks, w)
			}
		}
		if len(lacks) > 0 {
			return &UserProblem{in.Peer.Name, fmt.Sprintf("tls.crt lacks the DNS name %s: every member's peer name must be covered, members included that do not exist yet (it has %s)",
				strings.Join(lacks, " and "), dnsNames(peer.leaf))}
		}
		for _, u := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
			if err := peer.verify(peer.roots, u, ""); err != nil {
				return &UserProblem{in.Peer.Name, fmt.Sprintf("members would refuse it from each other (they trust its ca.crt, and each is server and client to the others): %v", err)}
			}
		}
	}
	return nil
}

// UserTrust identifies the CAs the members trust (the server and peer Secrets' ca.crt): a change
// must restart them, since etcd reads its trusted CAs only at start.
func UserTrust(in UserCertificates) string {
	h := sha256.New()
	for _, s := range []*UserSecret{in.Server, in.Peer} {
		if s != nil {
			h.Write([]byte(s.Name))
			h.Write([]byte{0})
			h.Write(s.Data[CACertKey])
			h.Write([]byte{0})
		}
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}

type keyPair struct {
	leaf          *x509.Certificate
	intermediates *x509.CertPool
	roots         *x509.CertPool
	now           time.Time
}

func parseKeyPair(s *UserSecret, now time.Time) (*keyPair, error) {
	var missing []string
	for _, k := range []string{CertKey, PrivKeyKey, CACertKey} {
		if len(s.Data[k]) == 0 {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		return nil, &UserProblem{s.Name, fmt.Sprintf("has no %s (a kubernetes.io/tls Secret with ca.crt is needed, as cert-manager writes)", strings.Join(missing, ", "))}
	}
	pair, err := tls.X509KeyPair(s.Data[CertKey], s.Data[PrivKeyKey])
	if err != nil {
		return nil, &UserProblem{s.Name, fmt.Sprintf("tls.crt and tls.key are not a usable key pair: %v", err)}
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, &UserProblem{s.Name, fmt.Sprintf("tls.crt: %v", err)}
	}
	kp := &keyPair{leaf: leaf, intermediates: x509.NewCertPool(), roots: x509.NewCertPool(), now: now}
	for _, der := range pair.Certificate[1:] {
		c, err := x509.ParseCertificate(der)
		if err != nil {
			return nil, &UserProblem{s.Name, fmt.Sprintf("tls.crt: intermediate certificate: %v", err)}
		}
		kp.intermediates.AddCert(c)
	}
	if !kp.roots.AppendCertsFromPEM(s.Data[CACertKey]) {
		return nil, &UserProblem{s.Name, "ca.crt holds no PEM certificate"}
	}
	switch {
	case now.After(leaf.NotAfter):
		return nil, &UserProblem{s.Name, fmt.Sprintf("the certificate in tls.crt expired at %s", leaf.NotAfter.UTC().Format(time.RFC3339))}
	case now.Before(leaf.NotBefore):
		return nil, &UserProblem{s.Name, fmt.Sprintf("the certificate in tls.crt is not valid before %s", leaf.NotBefore.UTC().Format(time.RFC3339))}
	}
	return kp, nil
}

// verify checks the leaf against roots for usage (and host, when not empty), saying first whether
// the chain or the usage fails, then the name.
func (kp *keyPair) verify(roots *x509.CertPool, usage x509.ExtKeyUsage, host string) error {
	opts := x509.VerifyOptions{Roots: roots, Intermediates: kp.intermediates, CurrentTime: kp.now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}
	if _, err := kp.leaf.Verify(opts); err != nil {
		var unknown x509.UnknownAuthorityError
		if errors.As(err, &unknown) {
			return errors.New("no CA in that ca.crt signed it")
		}
		return err
	}
	opts.KeyUsages = []x509.ExtKeyUsage{usage}
	if _, err := kp.leaf.Verify(opts); err != nil {
		return fmt.Errorf("its extended key usage does not allow %s", usageName(usage))
	}
	if host != "" {
		if err := kp.leaf.VerifyHostname(host); err != nil {
			return fmt.Errorf("it is not valid for %s (it has %s)", host, dnsNames(kp.leaf))
		}
	}
	return nil
}

func usageName(u x509.ExtKeyUsage) string {
	if u == x509.ExtKeyUsageServerAuth {
		return "server auth"
	}
	return "client auth"
}

func dnsNames(c *x509.Certificate) string {
	if len(c.DNSNames) == 0 {
		return "no DNS names"
	}
	return strings.Join(c.DNSNames, ", ")
}
