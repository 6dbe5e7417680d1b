// Package skill reads, writes, validates and packs Agent Skills: a folder
// holding a SKILL.md (YAML front matter between two `---` lines, then a
// Markdown body of instructions) and any bundled files (scripts, references,
// assets, text or binary).
//
// The package is pure: it knows nothing of Kubernetes. The operator, the
// kubectl plugin and the agent runtime all call it, so a skill is judged the
// same way offline and in the cluster.
//
// # Round trip
//
// ParseDir and ParseSkillMD keep what they read exactly: the front matter
// text (Skill.FrontMatter, including keys that other products add and objects
// nested under `metadata`), the body, and every bundled file with its
// executable bit. Render writes Skill.FrontMatter verbatim when it is set and
// generates canonical YAML from the fields only when it is empty, so for a
// folder that ParseDir accepts, Render reproduces SKILL.md byte for byte and
// WriteDir reproduces every file byte for byte.
//
// # Line endings and byte order mark
//
// CRLF line endings are preserved exactly: the front matter and the body keep
// their bytes, and Render derives the line ending of each `---` line from the
// front-matter line next to it (the opening line from the first front-matter
// line, the closing line from the last). ParseSkillMD refuses the rare file
// whose `---` lines end differently from those neighbours, with an error that
// says so, because it could not be written back unchanged.
//
// A UTF-8 byte order mark before the opening `---` is preserved too: it is
// recorded in Skill.BOM and written back by Render. Validate reports it as a
// warning, since some agents do not recognise front matter after a mark, and
// it is not part of the cluster form of a skill (where the warning tells the
// user it will be dropped).
//
// A SKILL.md whose closing `---` is the last line without a line break is
// refused: it has no body, and appending the missing line break would change
// the file.
//
// # Validation
//
// Validate returns every problem at once, each with the Kubernetes field path
// it concerns (metadata.name, spec.description, spec.instructions,
// spec.files[3].path, spec.frontMatter, ...) and a hint that says how to fix
// it. Errors stop a skill from being served; warnings are shown in status.
//
// # ConfigMap layout
//
// Pack spreads a skill over the payloads (Shard) of one or more ConfigMaps,
// each at most maxShardBytes, counting every key and value as the API server
// does; the default, DefaultShardBytes, is the 1 MiB limit less 64 KiB of
// headroom. Shard 0 holds:
//
//   - SKILL.md: the Render output;
//   - manifest.json: the Manifest, one line per bundled file giving its path,
//     key, shard, encoding, decoded size and executable bit, plus the skill's
//     name, Hash and invocation mode.
//
// Each bundled file is one key, unique across all shards and readable as its
// path: `scripts/fill.py` becomes `scripts_fill.py`, characters a key cannot
// hold become `-`, a leading dot gets `_` before it, and a clash adds `-2`
// before the extension. Files go, in order, into the first shard with room.
// A file is stored as "text" (valid UTF-8, verbatim in Data), "binary"
// (verbatim in BinaryData) or "gzip" (compressed in BinaryData). Only
// non-executable files are compressed: binary files when that saves at least
// a tenth of their size, and text files too large for a shard otherwise. A
// file that does not fit in a shard of its own, or a skill that needs more
// than MaxShards shards, gives a *TooLargeError saying to serve the files
// from an OCI image (spec.bundle.image) instead.
//
// Mounted as volumes, each key becomes a file, so text and binary files can be
// used where they are. OpenShardDirs reads a skill from the mounted folders,
// ReadShards and Unpack from the payloads; a Bundle is an fs.FS of the skill
// folder that never reads outside it. Since a mounted update lands one
// ConfigMap at a time, Bundle.Skill checks the manifest's hash and fails when
// it reads shards of two versions.
package skill
