// Package catalog is the index of the skills an Agent may use: the format the
// Agent controller writes into the agent's catalog ConfigMaps, and the store
// the agent runtime reads from the folders where those ConfigMaps are
// mounted.
//
// The package is pure: it imports no Kubernetes code. Both sides speak in
// ConfigMap Data maps and folders, so the controller and the runtime can be
// tested without a cluster.
//
// # What is mounted where
//
// Everything the runtime reads lives under MountRoot. Catalog shard i is
// mounted at CatalogDir/<i>, for every i below MaxShards: the Deployment
// always declares MaxShards optional ConfigMap volumes, so a catalog that
// grows a shard never changes the pod template. The ConfigMaps of skill NAME
// are mounted at SkillsDir/NAME/<i>, one folder per shard, laid out as
// package skill packs them (manifest.json and SKILL.md in shard 0).
//
// A skill too large for ConfigMaps sets spec.bundle.image: an OCI image
// whose root holds the skill folder's files. Its SKILL.md still comes from
// the Skill object and its ConfigMaps, mounted as above; the image is
// mounted read-only, as a Kubernetes image volume, at
// SkillsDir/NAME/BundleDir (`bundle`). The catalog entry names the image
// (bundleImage), so that the Agent controller can declare the volume and
// the store knows where to read. Image volumes are on by default from
// Kubernetes 1.35 (the ImageVolume feature gate; older releases need it
// enabled) and need a container runtime that supports them.
//
// # ConfigMap layout
//
// Encode spreads a Catalog over one or more ConfigMaps of at most
// maxShardBytes each, counting keys and values as the API server does. Every
// shard holds the key catalog.json (CatalogKey); shard 0 also holds
// instructions.md (InstructionsKey), the Agent's system prompt as written,
// so it reads naturally in `kubectl get configmap -o yaml`.
//
// catalog.json is a JSON object with one line per skill:
//
//	{"version":1,"agent":"support","revision":"sha256:5d1e…","shard":0,"shards":2,"skills":[
//	{"name":"pdf-forms","description":"Fill PDF forms.","invocation":"Auto","contentHash":"sha256:9f0c…","shards":1,"allowedTools":["Bash(pdftk:*)"]},
//	{"name":"release-notes","description":"Write release notes.","invocation":"Explicit","contentHash":"sha256:77ab…","shards":1},
//	{"name":"slides","description":"Build slide decks.","invocation":"Auto","contentHash":"sha256:3c4d…","shards":1,"bundleImage":"ghcr.io/acme/slides@sha256:…"}
//	]}
//
// The header fields are:
//
//   - version: FormatVersion; a reader refuses any other, so an agent image
//     older than the operator says so instead of misreading;
//   - agent: the Agent's name;
//   - revision: Catalog.Revision of the whole catalog, the same in every
//     shard;
//   - shard and shards: this shard's index and the number of shards.
//
// Each skill entry has name, description, invocation ("Auto" or "Explicit";
// Disabled skills are never in a catalog), contentHash (the Skill's
// status.contentHash, which is also the hash in its manifest.json), shards
// (how many ConfigMaps the skill is spread over), allowedTools (left out
// when empty), and for a bundled skill bundleImage and bundlePullPolicy
// (spec.bundle; left out when empty). The revision covers the bundle fields
// only of entries that have them, so catalogs without bundles keep their
// revision. Skills are sorted by name and split into consecutive runs:
// shard 0 holds the first skills, shard 1 the next, and so on. Readers
// ignore fields they do not know.
//
// # Reading mounted shards
//
// The kubelet updates a mounted ConfigMap by writing its keys into a new
// timestamped folder, pointing a `..data_tmp` link at it and renaming that
// link over `..data`; each key at the top of the volume is a link
// `key -> ..data/key`. Load resolves `..data` once per shard and reads every
// key from the folder it names, so the keys of one shard always come from
// the same version. Shards are updated one ConfigMap at a time, so Load
// checks that shards 0 to shards-1 carry the same revision and agent, that
// each names its own index and the same count, and that the content read
// hashes to that revision; anything else is refused with an error saying
// which shard is out of step. Shards numbered at or above the count are
// leftovers of a larger catalog and are ignored. A folder without
// catalog.json is an optional ConfigMap that does not exist.
//
// Folders without `..data` (a plain copy of the keys, as in local runs) are
// read directly.
//
// # Progressive disclosure
//
// Store is what the runtime serves from. Prompt writes the
// `<available_skills>` block of the system prompt: only Auto skills, name and
// escaped description, in name order, within a token budget; skills that do
// not fit are counted and named as omitted inside the block. Use loads a
// skill's body when the model asks for it (Explicit skills only when the user
// named them), and ReadFile reads one bundled file. Both go through the
// skill's manifest and never through a path taken from the request, so
// nothing outside the skill's own files can be read.
//
// A bundled skill has no manifest of its files: Use lists the image's files
// by walking SkillsDir/NAME/BundleDir, sorted, skipping anything but
// regular files and links to them, at most MaxBundleFiles of them
// (Loaded.FilesTruncated says when there are more) and looking at a bounded
// number of entries. ReadFile serves SKILL.md from the ConfigMaps as for any
// skill, and every other path from the image through os.Root, so a path
// with `..`, an absolute path or a link leading out of the image is refused;
// it reads only regular files and never more than MaxBundleFileBytes, even
// when the caller sets no limit. A SKILL.md inside the image is ignored.
// The image is not covered by the contentHash check: an image volume never
// changes under a running pod, and the Deployment rolls when bundleImage
// changes; until the rollout ends, an old pod serves the old image's files.
// A pod started before the skill had a bundle has no such folder, and the
// skill is ErrUnavailable there.
//
// Before serving a skill, the store checks that its mounted shards hash to
// the catalog's contentHash (skill.Bundle.Skill rebuilds the skill and
// hashes it). A skill whose shards are all mounted through `..data` is
// checked once per version: the timestamped folders never change, so the
// check holds until a link moves. A mismatch is read again once, then
// reported as ErrOutOfStep: the skill and the catalog are mid-update.
//
// Watch polls the `..data` links of the catalog shards (or the size and
// modification time of catalog.json where there is no link) and reloads when
// one changes. A reload that fails keeps the catalog being served.
package catalog
