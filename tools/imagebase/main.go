// Command imagebase writes the base image of the platform's service images
// into an OCI image layout, without a Docker daemon and without network.
//
// ko's default base image lives in a registry that the project's machines
// cannot reach, so ko is pointed (in .ko.yaml) at this image by digest, and
// ko finds it in its KOCACHE (KOCACHE/img is an OCI layout that ko consults
// for digest references before going to a registry).
//
// The image is the minimum a static Go binary needs: /etc/passwd and
// /etc/group with the "nonroot" user (65532, the uid the Helm charts run
// as), CA certificates for outbound TLS (webhooks, OTLP), /etc/nsswitch.conf
// so the Go resolver consults /etc/hosts first, and a /tmp. Everything is
// byte-for-byte reproducible (fixed timestamps, uncompressed layer, CA roots
// from the pinned golang.org/x/crypto/x509roots/fallback module rather than
// the machine's), so its digest can be pinned in .ko.yaml and verified:
//
//	go run ./imagebase -layout ../.kocache/img -verify ../.ko.yaml
package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/match"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"golang.org/x/crypto/x509roots/fallback/bundle"
)

// repository names the image in references. Nothing is ever pulled from it:
// ko resolves the digest from KOCACHE. "localhost" makes a missing cache
// fail fast instead of reaching out to a public registry.
const repository = "localhost/esim-base"

const (
	uid = 65532
	gid = 65532
)

// epoch is the timestamp of every file and of the image itself, for
// reproducible digests (ko stamps its own layers the same way by default).
var epoch = time.Unix(0, 0).UTC()

// platforms are the architectures developers and clusters run; the layer is
// shared, only the config differs.
var platforms = []v1.Platform{
	{OS: "linux", Architecture: "amd64"},
	{OS: "linux", Architecture: "arm64"},
}

func main() {
	layoutPath := flag.String("layout", ".kocache/img", "OCI image layout to add the base image to (ko reads KOCACHE/img)")
	verify := flag.String("verify", "", "a .ko.yaml whose defaultBaseImage must equal the image written")
	flag.Parse()
	ref, err := run(*layoutPath, *verify)
	if err != nil {
		fmt.Fprintln(os.Stderr, "imagebase:", err)
		os.Exit(1)
	}
	fmt.Println(ref)
}

func run(layoutPath, verify string) (string, error) {
	idx, images, err := baseIndex()
	if err != nil {
		return "", err
	}
	d, err := idx.Digest()
	if err != nil {
		return "", err
	}
	ref := repository + "@" + d.String()

	p, err := layout.FromPath(layoutPath)
	if err != nil {
		if p, err = layout.Write(layoutPath, empty.Index); err != nil {
			return "", err
		}
	}
	if err := p.ReplaceIndex(idx, match.Digests(d)); err != nil {
		return "", err
	}
	// ko looks every manifest up among the layout's top-level descriptors,
	// including the per-platform images an index points to.
	for _, img := range images {
		id, err := img.Digest()
		if err != nil {
			return "", err
		}
		if err := p.ReplaceImage(img, match.Digests(id)); err != nil {
			return "", err
		}
	}

	if verify != "" {
		pinned, err := defaultBaseImage(verify)
		if err != nil {
			return "", err
		}
		if pinned != ref {
			return "", fmt.Errorf("%s pins defaultBaseImage %q but the base image is %q: update %s", verify, pinned, ref, verify)
		}
	}
	return ref, nil
}

func baseIndex() (v1.ImageIndex, []v1.Image, error) {
	fs, err := rootfs()
	if err != nil {
		return nil, nil, err
	}
	layer := static.NewLayer(fs, types.OCIUncompressedLayer)
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	var images []v1.Image
	for _, plat := range platforms {
		img, err := mutate.AppendLayers(mutate.MediaType(empty.Image, types.OCIManifestSchema1), layer)
		if err != nil {
			return nil, nil, err
		}
		img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
		cf, err := img.ConfigFile()
		if err != nil {
			return nil, nil, err
		}
		cf = cf.DeepCopy()
		cf.OS, cf.Architecture = plat.OS, plat.Architecture
		cf.Created = v1.Time{Time: epoch}
		cf.Author = "github.com/esimplatform/esim/tools/imagebase"
		cf.Config.User = fmt.Sprintf("%d:%d", uid, gid)
		cf.Config.WorkingDir = "/"
		cf.Config.Env = []string{
			"PATH=/usr/local/bin:/usr/bin:/bin",
			"SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt",
		}
		cf.History = []v1.History{{Created: v1.Time{Time: epoch}, CreatedBy: "tools/imagebase", Comment: "nonroot user, CA certificates"}}
		if img, err = mutate.ConfigFile(img, cf); err != nil {
			return nil, nil, err
		}
		plat := plat
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add:        img,
			Descriptor: v1.Descriptor{Platform: &plat},
		})
		images = append(images, img)
	}
	return idx, images, nil
}

// rootfs returns the image's only layer as an uncompressed tar: compression
// output may change between Go releases, the digest must not.
func rootfs() ([]byte, error) {
	certs, err := caBundle()
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dir := func(name string, mode int64, owner int) error {
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: mode, Uid: owner, Gid: owner, ModTime: epoch, Format: tar.FormatPAX})
	}
	file := func(name string, data []byte) error {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(data)), ModTime: epoch, Format: tar.FormatPAX}); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	steps := []func() error{
		func() error { return dir("etc/", 0o755, 0) },
		func() error {
			return file("etc/passwd", []byte("root:x:0:0:root:/root:/sbin/nologin\n"+
				"nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n"+
				fmt.Sprintf("nonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", uid, gid)))
		},
		func() error {
			return file("etc/group", []byte("root:x:0:\nnobody:x:65534:\n"+fmt.Sprintf("nonroot:x:%d:\n", gid)))
		},
		func() error { return file("etc/nsswitch.conf", []byte("hosts: files dns\n")) },
		func() error { return dir("etc/ssl/", 0o755, 0) },
		func() error { return dir("etc/ssl/certs/", 0o755, 0) },
		func() error { return file("etc/ssl/certs/ca-certificates.crt", certs) },
		func() error { return dir("home/", 0o755, 0) },
		func() error { return dir("home/nonroot/", 0o700, uid) },
		func() error { return dir("tmp/", 0o1777, 0) },
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// caBundle is the NSS root store as PEM. Roots that carry a distrust-after
// constraint are left out: a PEM file cannot express the constraint, and
// trusting them unconditionally would be wider than NSS does.
func caBundle() ([]byte, error) {
	var out bytes.Buffer
	n := 0
	for root := range bundle.Roots() {
		if root.Constraint != nil {
			continue
		}
		if err := pem.Encode(&out, &pem.Block{Type: "CERTIFICATE", Bytes: root.Certificate}); err != nil {
			return nil, err
		}
		n++
	}
	if n == 0 {
		return nil, errors.New("no CA roots in x509roots/fallback/bundle")
	}
	return out.Bytes(), nil
}

// defaultBaseImage reads the defaultBaseImage key of a .ko.yaml. A line scan
// is enough for the one top-level scalar this needs.
func defaultBaseImage(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "defaultBaseImage:"); ok {
			v, _, _ = strings.Cut(v, " #")
			return strings.Trim(strings.TrimSpace(v), `"'`), nil
		}
	}
	if err := s.Err(); err != nil {
		return "", err
	}
	return "", fmt.Errorf("%s has no defaultBaseImage", path)
}
