/** The left-sidebar catalog browser and its context actions. */
import { ILayoutRestorer, JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { ICommandPalette } from '@jupyterlab/apputils';
import { INotebookTracker } from '@jupyterlab/notebook';

import { addCatalogActions } from './actions';
import { CatalogModel } from './catalogModel';
import { CatalogBrowser } from './catalogView';
import { ServerApi } from './client';

export const catalogPlugin: JupyterFrontEndPlugin<void> = {
  id: 'uc-jupyter-labextension:catalog',
  description: 'A Unity Catalog browser in the left sidebar, with "Insert %uc_load" and "Copy name".',
  autoStart: true,
  requires: [INotebookTracker],
  optional: [ICommandPalette, ILayoutRestorer],
  activate: (
    app: JupyterFrontEnd,
    tracker: INotebookTracker,
    palette: ICommandPalette | null,
    restorer: ILayoutRestorer | null
  ) => {
    const api = new ServerApi();
    const model = new CatalogModel(api);
    const browser = new CatalogBrowser(model);
    app.shell.add(browser, 'left', { rank: 650 });
    if (restorer) {
      restorer.add(browser, browser.id);
    }
    addCatalogActions(app, browser, tracker, palette, api);
  }
};
