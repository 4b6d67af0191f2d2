// Package pki issues the certificates of an etcd cluster from a per-cluster CA.
// ECDSA P-256 keys: fast to generate, accepted by every etcd version the operator runs.
package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"time"
)

// Secret keys, as in kubernetes.io/tls Secrets.
const (
	CACertKey  = "ca.crt"
	CAKeyKey   = "ca.key"
	CertKey    = "tls.crt"
	PrivKeyKey = "tls.key"
)

const (
	caValidity   = 10 * 365 * 24 * time.Hour
	leafValidity = 2 * 365 * 24 * time.Hour
	// RenewBefore is how long before expiry a leaf certificate is re-issued.
	RenewBefore = 30 * 24 * time.Hour
)

// CA is a certificate authority able to sign leaves.
type CA struct {
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey
	// CertPEM is the CA certificate as stored.
	CertPEM []byte
}

// NewCA creates a self-signed CA named cn.
func NewCA(cn string, now time.Time) (*CA, map[string][]byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generate CA key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: cn, Organization: []string{"etcd-autopilot"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(caValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, fmt.Errorf("self-sign CA %s: %w", cn, err)
	}
	keyPEM, err := encodeKey(key)
	if err != nil {
		return nil, nil, err
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	ca, err := LoadCA(map[string][]byte{CACertKey: certPEM, CAKeyKey: keyPEM})
	if err != nil {
		return nil, nil, err
	}
	return ca, map[string][]byte{CACertKey: certPEM, CAKeyKey: keyPEM}, nil
}

// LoadCA reads a CA from Secret data written by NewCA.
func LoadCA(data map[string][]byte) (*CA, error) {
	cb, _ := pem.Decode(data[CACertKey])
	kb, _ := pem.Decode(data[CAKeyKey])
	if cb == nil || kb == nil {
		return nil, errors.New("CA secret lacks a PEM ca.crt or ca.key")
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("parse CA certificate: %w", err)
	}
	key, err := x509.ParseECPrivateKey(kb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("parse CA key: %w", err)
	}
	return &CA{Cert: cert, Key: key, CertPEM: data[CACertKey]}, nil
}

// Usage is what a leaf certificate is for.
type Usage int

const (
	// ServerAndClient certificates: etcd peers are both (each dials the others).
	ServerAndClient Usage = iota
	ClientOnly
)

// Issue signs a leaf for cn with the given DNS and IP SANs, and returns Secret data:
// tls.crt, tls.key and ca.crt.
func (ca *CA) Issue(cn string, dnsNames []string, ips []net.IP, usage Usage, now time.Time) (map[string][]byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate key for %s: %w", cn, err)
	}
	eku := []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	if usage == ClientOnly {
		eku = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: cn, Organization: []string{"etcd-autopilot"}},
		DNSNames:     dnsNames,
		IPAddresses:  ips,
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(leafValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  eku,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		return nil, fmt.Errorf("sign certificate for %s: %w", cn, err)
	}
	keyPEM, err := encodeKey(key)
	if err != nil {
		return nil, err
	}
	return map[string][]byte{
		CertKey:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		PrivKeyKey: keyPEM,
		CACertKey:  ca.CertPEM,
	}, nil
}

// HasCertificate says whether Secret data holds a parseable leaf certificate.
func HasCertificate(data map[string][]byte) bool {
	_, ok := leaf(data)
	return ok
}

// SignedBy says whether the leaf certificate in Secret data was signed by ca; false when there is
// no parseable certificate.
func (ca *CA) SignedBy(data map[string][]byte) bool {
	cert, ok := leaf(data)
	return ok && cert.CheckSignatureFrom(ca.Cert) == nil
}

func leaf(data map[string][]byte) (*x509.Certificate, bool) {
	b, _ := pem.Decode(data[CertKey])
	if b == nil {
		return nil, false
	}
	cert, err := x509.ParseCertificate(b.Bytes)
	return cert, err == nil
}

// NeedsReissue says whether leaf Secret data is missing, not signed by ca, lacks a wanted DNS name,
// or expires within RenewBefore.
func (ca *CA) NeedsReissue(data map[string][]byte, dnsNames []string, now time.Time) bool {
	cert, ok := leaf(data)
	if !ok || len(data[PrivKeyKey]) == 0 || cert.CheckSignatureFrom(ca.Cert) != nil {
		return true
	}
	if now.Add(RenewBefore).After(cert.NotAfter) {
		return true
	}
	have := map[string]bool{}
	for _, n := range cert.DNSNames {
		have[n] = true
	}
	for _, n := range dnsNames {
		if !have[n] {
			return true
		}
	}
	return false
}

func encodeKey(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("marshal key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 126))
	if err != nil {
		panic(fmt.Sprintf("crypto/rand failed: %v", err))
	}
	return n
}
