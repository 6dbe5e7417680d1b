// Judges each skill folder named on the command line with skills-ref's
// validate(), in one process, and prints a JSON object mapping each folder to
// the messages of the rules it breaks (none for a valid skill).
import { validate } from "skills-ref";

const verdicts = {};
for (const dir of process.argv.slice(2)) {
  verdicts[dir] = await validate(dir);
}
process.stdout.write(JSON.stringify(verdicts));
