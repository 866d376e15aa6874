/**
 * The status-bar item for the rank pool of the current notebook's kernel: `Ranks: 2 cpu · idle`,
 * hidden when that kernel has no pool. It polls `pools` every 3 s (backing off while that fails),
 * only while a notebook with a kernel is current and the browser tab is visible.
 * Hooks: `.uc-PoolStatus` with `data-uc-state` (idle|busy|...) and `data-uc-size`.
 */
import { JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';
import { IStatusBar } from '@jupyterlab/statusbar';
import { ISignal, Signal } from '@lumino/signaling';
import { Widget } from '@lumino/widgets';

import { ServerApi } from './client';
import { IVisibility, Poller, PoolStatusModel } from './poolModel';

export const POLL_INTERVAL_MS = 3000;
export const MAX_POLL_INTERVAL_MS = 60000;

/** `document.visibilityState`, as the poller wants it. */
export const documentVisibility: IVisibility = {
  visible: () => document.visibilityState !== 'hidden',
  onChange: listener => {
    document.addEventListener('visibilitychange', listener);
    return () => document.removeEventListener('visibilitychange', listener);
  }
};

export class PoolStatusItem extends Widget {
  private readonly _activeChanged = new Signal<this, void>(this);

  constructor(readonly model: PoolStatusModel) {
    super();
    this.addClass('uc-PoolStatus');
    this.addClass('jp-StatusBar-TextItem');
    model.onChange(() => this.render());
    this.render();
  }

  /** Fires when the item should be shown or hidden (the status bar asks `model.label`). */
  get activeStateChanged(): ISignal<this, void> {
    return this._activeChanged;
  }

  render(): void {
    const pool = this.model.pool;
    const label = this.model.label;
    this.node.textContent = label ?? '';
    this.node.title = this.model.title;
    this.node.dataset.ucState = pool ? String(pool.state) : 'none';
    this.node.dataset.ucSize = pool ? String(pool.size) : '0';
    this.node.classList.toggle('uc-mod-busy', pool?.state === 'busy');
    this._activeChanged.emit();
  }
}

export const poolStatusPlugin: JupyterFrontEndPlugin<void> = {
  id: 'uc-jupyter-labextension:pool-status',
  description: "The status-bar item for the rank pool of the current notebook's kernel.",
  autoStart: true,
  requires: [INotebookTracker],
  optional: [IStatusBar],
  activate: (app: JupyterFrontEnd, tracker: INotebookTracker, statusBar: IStatusBar | null) => {
    if (!statusBar) {
      return;
    }
    const api = new ServerApi();
    const model = new PoolStatusModel(() => api.pools());
    const poller = new Poller({
      poll: () => model.update(),
      clock: {
        setTimeout: (fn, ms) => window.setTimeout(fn, ms),
        clearTimeout: handle => window.clearTimeout(handle as number)
      },
      visibility: documentVisibility,
      interval: POLL_INTERVAL_MS,
      maxInterval: MAX_POLL_INTERVAL_MS
    });
    const item = new PoolStatusItem(model);
    statusBar.registerStatusItem(poolStatusPlugin.id, {
      item,
      align: 'left',
      rank: 5,
      isActive: () => model.label !== null,
      activeStateChanged: item.activeStateChanged
    });

    // Follow the current notebook's kernel; poll only while there is one.
    const follow = () => {
      const id = tracker.currentWidget?.sessionContext.session?.kernel?.id ?? null;
      const changed = id !== model.kernelId;
      model.kernelId = id;
      if (id === null) {
        poller.stop();
      } else if (!poller.running) {
        poller.start();
      } else if (changed) {
        poller.refresh();
      }
    };
    const watch = (panel: NotebookPanel) => {
      panel.sessionContext.kernelChanged.connect(follow);
      panel.sessionContext.sessionChanged.connect(follow);
    };
    tracker.forEach(watch);
    tracker.widgetAdded.connect((_, panel) => watch(panel));
    tracker.currentChanged.connect(follow);
    follow();
  }
};
