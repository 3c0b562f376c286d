// Every page of the console, by the name in `#/<name>`.
import { groups, keys, users } from "./people.js";
import { audit, overview, usage } from "./activity.js";
import { playground, plugins, webhooks } from "./operations.js";

export const pages = { overview, users, keys, groups, usage, audit, webhooks, plugins, playground };
