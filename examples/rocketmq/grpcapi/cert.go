package grpcapi

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/brokercore/brokercore/examples/rocketmq/internal/atomicfile"
)

// Certificate file names under Options.CertDir.
const (
	CertFile = "grpc-cert.pem"
	KeyFile  = "grpc-key.pem"
)

// certValidity is how long a generated certificate is valid. The stock
// client skips verification, so this only matters to tools that look.
const certValidity = 10 * 365 * 24 * time.Hour

// loadOrCreateCert returns the TLS certificate kept in dir, generating a
// self-signed one (ECDSA P-256, names localhost, 127.0.0.1, ::1) the first
// time. With dir "" the certificate lives in memory only. A pair that exists
// but does not parse is an error, never silently replaced.
func loadOrCreateCert(dir string) (tls.Certificate, error) {
	if dir != "" {
		certPEM, err1 := os.ReadFile(filepath.Join(dir, CertFile))
		keyPEM, err2 := os.ReadFile(filepath.Join(dir, KeyFile))
		switch {
		case err1 == nil && err2 == nil:
			c, err := tls.X509KeyPair(certPEM, keyPEM)
			if err != nil {
				return tls.Certificate{}, fmt.Errorf("grpcapi: certificate in %s: %w", dir, err)
			}
			return c, nil
		case !errors.Is(err1, fs.ErrNotExist) && err1 != nil:
			return tls.Certificate{}, fmt.Errorf("grpcapi: %w", err1)
		case !errors.Is(err2, fs.ErrNotExist) && err2 != nil:
			return tls.Certificate{}, fmt.Errorf("grpcapi: %w", err2)
		case (err1 == nil) != (err2 == nil):
			return tls.Certificate{}, fmt.Errorf("grpcapi: only one of %s and %s exists in %s", CertFile, KeyFile, dir)
		}
	}
	certPEM, keyPEM, err := selfSigned(time.Now())
	if err != nil {
		return tls.Certificate{}, err
	}
	if dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return tls.Certificate{}, fmt.Errorf("grpcapi: %w", err)
		}
		// The key first: a crash between the two leaves no certificate,
		// so the next start generates a fresh pair instead of failing.
		if err := atomicfile.WriteFile(filepath.Join(dir, KeyFile), keyPEM, 0o600); err != nil {
			return tls.Certificate{}, fmt.Errorf("grpcapi: %w", err)
		}
		if err := atomicfile.WriteFile(filepath.Join(dir, CertFile), certPEM, 0o644); err != nil {
			return tls.Certificate{}, fmt.Errorf("grpcapi: %w", err)
		}
	}
	return tls.X509KeyPair(certPEM, keyPEM)
}

func selfSigned(now time.Time) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("grpcapi: generating key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, nil, fmt.Errorf("grpcapi: serial: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "brokercore rocketmq gRPC", Organization: []string{"brokercore"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(certValidity),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		DNSNames:              []string{"localhost"},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, fmt.Errorf("grpcapi: creating certificate: %w", err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("grpcapi: encoding key: %w", err)
	}
	certPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM = pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
	return certPEM, keyPEM, nil
}
