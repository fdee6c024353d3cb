// The broker's console (/console on a broker).

import { api } from "./api.js";
import { startConsole } from "./shell.js";
import * as broker from "./broker.js";
import * as groups from "./groups.js";
import * as produce from "./produce.js";
import * as rates from "./rates.js";
import * as search from "./search.js";
import * as tables from "./tables.js";
import * as topics from "./topics.js";

startConsole("sparkmq broker", {
  overview: { title: "Broker", render: broker.render },
  topics: { title: "Topics", render: topics.render },
  tables: { title: "Tables", render: tables.render },
  messages: { title: "Messages", render: search.render },
  groups: { title: "Groups", render: groups.render },
  rates: { title: "Rates", render: rates.render },
  produce: { title: "Produce", render: produce.render },
}, async () => {
  const b = await api("/v1/broker");
  return `${b.name} · ${b.role} · ${b.cluster}`;
});
